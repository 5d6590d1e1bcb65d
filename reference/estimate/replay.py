"""Greedy speculative decoding replayed from teacher-forced blocks, without running a model:
the same counts the decoder records, exact at temperature 0 only (docs/estimator.md).

Names follow Leviathan et al.: `gamma` draft tokens per iteration.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from specdec.reference.core.stats import DecodeStats


def replay_sequence(match: np.ndarray, block: np.ndarray, gamma: int, stats: DecodeStats,
                    proposal_hist: np.ndarray) -> None:
    """Add the iterations of one sequence (n = len(match) new tokens) to `stats`, and count each
    iteration's proposal length k in proposal_hist [gamma + 1]."""
    n = int(match.shape[0])
    t = 0
    while t < n:
        room = min(gamma, n - t - 1)  # the decoder never drafts past max_new_tokens
        k = min(room, int(block[t])) if room > 0 else 0
        accepted = min(int(match[t]), k)
        stats.record(k, accepted, accepted == k and k > 0)
        proposal_hist[k] += 1
        t += accepted + 1
    stats.new_tokens += n
    stats.target_passes = stats.iterations


def replay(matches: Sequence[np.ndarray], blocks: Sequence[np.ndarray], gamma: int, max_gamma: int
           ) -> tuple[DecodeStats, np.ndarray]:
    """Greedy speculative decoding over every sequence, replayed (no timings).

    Returns the DecodeStats the decoder would record and the histogram of proposal lengths
    k per iteration, float64 [gamma + 1]. max_gamma: the block length the data was recorded
    with; gamma may not exceed it.

    Raises:
        ValueError: gamma outside 0..max_gamma, or no replay data.
    """
    if not 0 <= gamma <= max_gamma:
        raise ValueError(f"gamma must be in 0..{max_gamma} (the recorded block length), got {gamma}")
    stats = DecodeStats(gamma)
    proposal_hist = np.zeros(gamma + 1)
    for match, block in zip(matches, blocks):
        if match is None or block is None:
            raise ValueError("no replay data: replay needs temperature 0 and a deterministic draft")
        replay_sequence(match, block, gamma, stats, proposal_hist)
    return stats, proposal_hist
