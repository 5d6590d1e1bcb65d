"""The model side, below the scorer seam: loading (folders, GGUF), placement on devices, the
backends and kernels, one model pass for every model kind (encoder-decoders included), the KV
session of one sequence and the ragged cache of a batch, and the target scorers built on them.
"""
