"""Keep freed large blocks in the process (glibc): a batched pass over a long context allocates
temporaries of tens of MB (the attention's keys and values repeated per query head); glibc
serves blocks above its mmap threshold (adjusted dynamically, at most 32 MB) with a fresh mmap
and unmaps them on free, so every pass pays page faults to zero them again. Measured on the
default target, 8 slots of 1,036 cached tokens, a pass of 2 tokens per slot: 450 ms in a process
whose threshold had not risen, 271 ms with the thresholds raised (benchmarks/RESULTS.md,
"Ragged batched decoding"). `keep_large_blocks` raises the mmap and trim thresholds once per
process (`mallopt`), so freed blocks are reused; the cost is memory not handed back to the OS
until exit. A no-op where the C library has no `mallopt` (not glibc).
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
THRESHOLD = 1 << 30


@lru_cache(maxsize=1)
def keep_large_blocks() -> bool:
    """Raise glibc's mmap and trim thresholds to 1 GiB; True if the C library took both."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD))
