"""Speculative decoding replayed along the target's own sequences, without running a model:
the counts the decoder records, exact at temperature 0 and their expectation at T > 0
(docs/estimator.md, "Replay").

The data per sequence of n new tokens: `block[t]`, how many tokens the drafter proposes from
the prefix x_<t, and `accept[i, t]`, the probability that draft i + 1 of that block is accepted
given drafts 1..i were and given the decode emits the sequence itself. A drafter whose draft at
length g is not the first g tokens of a longer one (a token tree: its node budget spreads over
its depths) gives both per draft length, `block[g - 1, t]` (its depth) and `accept[g - 1, i, t]`
(node i + 1 of the walk along the sequence), and `nodes[g - 1, t]`, its node count (the target
verifies every node: what the iteration's pass costs); an iteration with room for g drafts
reads the tree drafted at g. At temperature 0 `accept` is 1 for the block's leading tokens that
equal the sequence and 0 after (`accept_from_match`); at T > 0 it is min(1, q(x)/p(x)) at the
sequence's token x (`teacher_forced.path_accept`).
From an iteration starting at t the decode emits A + 1 tokens, A the number of accepted
drafts, so the chance that an iteration starts at each position follows by dynamic
programming and every count is a sum over positions weighted by it.

Names follow Leviathan et al.: `gamma` draft tokens per iteration.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from specdec.reference.core.stats import DecodeStats


def accept_from_match(match: np.ndarray, width: int) -> np.ndarray:
    """[width, n] float64: 1 where draft i + 1 of the block at t is among its `match[t]` leading
    tokens that equal the sequence, else 0 (a deterministic draft along its own sequence)."""
    return (np.arange(width)[:, None] < np.asarray(match)[None, :]).astype(np.float64)


def replay_sequence(accept: np.ndarray, block: np.ndarray, gamma: int, stats: DecodeStats,
                    verified_hist: np.ndarray, nodes: np.ndarray | None = None) -> None:
    """Add the (expected) iterations of one sequence of n = len(block) new tokens to `stats`, and
    each iteration's draft tokens verified to verified_hist: its proposal length k, or a token
    tree's node count, `nodes[g - 1, t]` (the target verifies every node)."""
    n = int(block.shape[-1])
    start = np.zeros(n + 1)  # P(an iteration starts at t)
    start[0] = 1.0
    for t in range(n):
        w = start[t]
        if w == 0.0:
            continue
        room = min(gamma, n - t - 1)  # the decoder never drafts past max_new_tokens
        rows, lengths = (accept[room - 1], block[room - 1]) if block.ndim == 2 and room > 0 else (accept, block)
        k = min(room, int(lengths[t])) if room > 0 else 0
        width = int(nodes[room - 1, t]) if nodes is not None and k > 0 else k
        survive = np.concatenate([[1.0], np.cumprod(np.nan_to_num(rows[:k, t]))]) if k else np.ones(1)  # P(A >= i)
        emitted = survive - np.append(survive[1:], 0.0)  # P(A = a), a = 0..k
        stats.iterations += w
        stats.drafted += w * k
        stats.verified += w * width
        stats.bonus += w * survive[k] if k > 0 else 0.0
        verified_hist[width] += w
        stats.proposed_hist[k] += w
        for a in range(k + 1):
            stats.accepted_hist[a] += w * emitted[a]
            start[t + a + 1] += w * emitted[a]
        for i in range(k):
            stats.reached[i] += w * survive[i]
            stats.accepted[i] += w * survive[i + 1]
    stats.new_tokens += n
    stats.target_passes = stats.iterations


def replay(accepts: Sequence[np.ndarray | None], blocks: Sequence[np.ndarray | None], gamma: int, max_gamma: int,
           nodes: Sequence[np.ndarray | None] | None = None) -> tuple[DecodeStats, np.ndarray]:
    """Speculative decoding over every sequence, replayed (no timings).

    Returns the DecodeStats the decoder records (at T > 0 their expectation: float counts) and
    the histogram of draft tokens verified per iteration (what its pass costs: v(k + 1)), float64:
    the proposal length k = 0..gamma, or for token trees (`nodes`: per sequence [W, n], each
    tree's node count) the node count. max_gamma: the block length the data was recorded with;
    gamma may not exceed it.

    Raises:
        ValueError: gamma outside 0..max_gamma, or no replay data.
    """
    if not 0 <= gamma <= max_gamma:
        raise ValueError(f"gamma must be in 0..{max_gamma} (the recorded block length), got {gamma}")
    nodes = list(nodes) if nodes is not None else [None] * len(blocks)
    stats = DecodeStats(gamma)
    widest = max((int(m[:gamma].max(initial=0)) for m in nodes if m is not None and gamma > 0), default=gamma)
    verified_hist = np.zeros(max(gamma, widest) + 1)
    for accept, block, tree in zip(accepts, blocks, nodes):
        if accept is None or block is None:
            raise ValueError("no replay data: the drafter's deeper drafts along the sequence are not known")
        replay_sequence(accept, block, gamma, stats, verified_hist, tree)
    return stats, verified_hist
