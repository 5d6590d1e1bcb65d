"""The decode core: sampling transforms, the verifier, the target scorer with its KV session,
the one decode loop, statistics, model loading.
"""
