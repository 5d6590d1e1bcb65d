"""The decode algorithm: the seams, the one decode step and its drivers (one sequence, a ragged
batch), the acceptance rules and verifier, draft-length policies, sampling transforms, token
trees, statistics. No model code: the target side is reached through the scorer seam
(`specdec.reference.core.scorer`); models, caches and backends live in `specdec.reference.model`.
"""
