"""Speculative decoding with B sequences per target pass (a serving engine's batch).

One iteration verifies gamma drafts for each of B sequences in one target pass over B x
(gamma + 1) tokens, t(B, gamma + 1), and drafts gamma tokens for each, gamma * c * t(B, 1) with
c the draft step's cost relative to the target's batched one-token step. Every sequence
gains E(gamma) = 1 + sum_{i<=gamma} prod_{j<=i} alpha_j tokens per iteration on average
(per-position acceptance, `specdec.simulator.positional`), so

    throughput(B, gamma) = B * E(gamma) / (t(B, gamma + 1) + gamma * c * t(B, 1))   tokens/s,
    latency(B, gamma)    = (t(B, gamma + 1) + gamma * c * t(B, 1)) / E(gamma)        s per token,
    speedup(B, gamma)    = E(gamma) * t(B, 1) / (t(B, gamma + 1) + gamma * c * t(B, 1)),

the speedup being the same for throughput and per-token latency against plain batched
decoding (gamma = 0). The larger B, the closer the pass is to compute-bound and the more
t(B, k) grows with k: that is why speculation that wins at batch 1 can lose at batch 32.
Pure numpy; measured t(B, k) come from `specdec estimate --batch-sizes`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import FloatArray, check_nonnegative
from specdec.simulator.positional import positional_expected_tokens_by_gamma


@dataclass(frozen=True)
class BatchTimes:
    """Measured t(B, k) (`specdec estimate --batch-sizes`): seconds[b][k - 1] = t(batch_sizes[b], k)."""

    batch_sizes: tuple[int, ...]  # [nB]: strictly increasing, >= 1
    seconds: tuple[tuple[float, ...], ...]  # [nB][K]: one target pass over B sequences x k new tokens, seconds
    device: str | None  # where they were measured (reported only)
    context_tokens: int | None  # context length of the timed passes (reported only)
    # (K, t_mix(B, 0..B) per batch size): steps of an engine's speculating server whose first r slots verify
    # K tokens and the rest one (`specdec llamacpp costs --mixed-k`, `equal_split.mixed_ubatches`); () when untimed
    mixed: tuple[tuple[int, tuple[tuple[float, ...], ...]], ...] = ()

    def mixed_steps(self) -> dict[int, dict[int, tuple[float, ...]]]:
        """{K: {B: t_mix(B, 0..B)}} of `mixed`."""
        return {k: dict(zip(self.batch_sizes, rows)) for k, rows in self.mixed}


@dataclass(frozen=True)
class BatchPlan:
    """speedup/throughput/latency [len(batch_sizes), max_gamma + 1] over gamma = 0..max_gamma."""

    batch_sizes: np.ndarray  # int [nB]
    expected_tokens: np.ndarray  # [G + 1]
    iteration_seconds: np.ndarray  # [nB, G + 1]
    speedup: np.ndarray
    throughput: np.ndarray  # tokens/s over the batch
    latency: np.ndarray  # seconds per token of one sequence

    def best_gamma(self, tolerance: float = 0.0) -> np.ndarray:
        """Best gamma per batch size: the smallest whose speedup is within `tolerance` (relative) of
        the largest, so ties, near-ties inside timing noise and "nothing beats plain decoding" go
        to the smaller gamma."""
        top = self.speedup.max(axis=1, keepdims=True)
        return np.argmax(self.speedup >= top * (1 - tolerance) - 1e-12, axis=1)


def check_batch_times(batch_sizes: npt.ArrayLike, seconds: npt.ArrayLike) -> tuple[np.ndarray, FloatArray]:
    """Batch sizes (strictly increasing, >= 1) and t(B, k) [nB, K] (positive, finite)."""
    b = np.asarray(batch_sizes)
    t = np.asarray(seconds, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or not np.issubdtype(b.dtype, np.integer) or b.min() < 1 or np.any(np.diff(b) <= 0):
        raise SpecdecError(f"batch sizes must be strictly increasing integers >= 1, got {b.tolist()}")
    if t.ndim != 2 or t.shape[0] != b.size or t.shape[1] < 1:
        raise SpecdecError(f"t(B, k) must have one row per batch size ({b.size}) and >= 1 column, got {t.shape}")
    if not np.all(np.isfinite(t)) or t.min() <= 0:
        raise SpecdecError("t(B, k) must be positive and finite")
    return b.astype(np.int64), t


def batch_plan(alphas: npt.ArrayLike, batch_sizes: npt.ArrayLike, seconds: npt.ArrayLike, c: float = 0.0,
               max_gamma: int | None = None) -> BatchPlan:
    """The table above for gamma = 0..max_gamma (default and at most K - 1, K the columns of t).

    alphas: per-position acceptances alpha_1..alpha_K' (gamma > K' reuses alpha_K');
    seconds[b, k - 1] = t(batch_sizes[b], k)."""
    b, t = check_batch_times(batch_sizes, seconds)
    c = float(check_nonnegative(c, "c"))
    top = t.shape[1] - 1 if max_gamma is None else min(int(max_gamma), t.shape[1] - 1)
    if top < 0:
        raise SpecdecError(f"max_gamma must be >= 0, got {max_gamma}")
    gammas = np.arange(top + 1)
    tokens = positional_expected_tokens_by_gamma(alphas, top)
    if tokens.ndim != 1:
        raise SpecdecError("batch_plan takes one acceptance curve alpha_1..alpha_K")
    iteration = t[:, :top + 1] + gammas * c * t[:, :1]
    return BatchPlan(b, tokens, iteration, tokens * t[:, :1] / iteration, b[:, None] * tokens / iteration,
                     iteration / tokens)


def interpolate_batches(batch_sizes: npt.ArrayLike, seconds: npt.ArrayLike, targets: npt.ArrayLike) -> FloatArray:
    """t(B, k) at the target batch sizes, linear in B between measured sizes (inside their range only)."""
    b, t = check_batch_times(batch_sizes, seconds)
    x = np.asarray(targets, dtype=np.float64)
    if x.min() < b[0] or x.max() > b[-1]:
        raise SpecdecError(f"batch sizes {x.min():g}..{x.max():g} lie outside the measured {b[0]}..{b[-1]}")
    return np.stack([np.interp(x, b, t[:, k]) for k in range(t.shape[1])], axis=1)


def batch_times_at(tables: Sequence[BatchTimes], context: int) -> BatchTimes:
    """t(B, k) at `context` tokens from tables timed at several context lengths (the same batch
    sizes and k's): linear in the context between the two timed lengths around it, never
    extrapolated (a pass reads the weights once whatever L, and L cached keys and values)."""
    ordered = sorted(tables, key=lambda t: t.context_tokens or 0)
    lengths = [t.context_tokens for t in ordered]
    if any(n is None for n in lengths) or len(set(lengths)) != len(lengths):
        raise SpecdecError("tables at several contexts need distinct context lengths")
    if any(t.batch_sizes != ordered[0].batch_sizes or len(t.seconds[0]) != len(ordered[0].seconds[0])
           or [k for k, _ in t.mixed] != [k for k, _ in ordered[0].mixed] for t in ordered):
        raise SpecdecError("tables at several contexts must time the same batch sizes, k's and mixed steps")
    if not lengths[0] <= context <= lengths[-1]:
        raise SpecdecError(f"context {context} is outside the timed contexts {lengths[0]}..{lengths[-1]} "
                           "(never extrapolated)")
    cube = np.array([t.seconds for t in ordered])  # [contexts, nB, K]
    table = np.apply_along_axis(lambda cell: np.interp(context, lengths, cell), 0, cube)
    mixed = tuple((k, tuple(tuple(float(np.interp(context, lengths, [t.mixed[i][1][b][r] for t in ordered]))
                                    for r in range(len(row))) for b, row in enumerate(rows)))
                  for i, (k, rows) in enumerate(ordered[0].mixed))
    return BatchTimes(ordered[0].batch_sizes, tuple(tuple(row) for row in table.tolist()), ordered[0].device, context,
                      mixed)


def batch_times_within(tables: Sequence[BatchTimes], context: float) -> BatchTimes:
    """`batch_times_at` with `context` held inside the timed contexts (one table: that table): the
    times a measured workload, whose context may lie a little outside them, is priced at."""
    if len(tables) == 1:
        return tables[0]
    lengths = [t.context_tokens or 0 for t in tables]
    return batch_times_at(tables, int(min(max(context, min(lengths)), max(lengths))))


def gamma_ranges(alphas: npt.ArrayLike, batch_sizes: npt.ArrayLike, seconds: npt.ArrayLike, c: float = 0.0,
                 max_gamma: int | None = None, tolerance: float = 0.0,
                 table: Callable[..., BatchPlan] = batch_plan) -> list[tuple[int, int, int]]:
    """[(batch_start, batch_end, gamma)]: the best gamma (`BatchPlan.best_gamma(tolerance)`) for
    every batch size from the smallest to the largest measured one (t interpolated in between),
    merged into ranges; gamma 0 means do not speculate. `table(alphas, sizes, seconds, c,
    max_gamma)` prices the batch (`batch_plan`, or an engine's own: `equal_split.equal_split_plan`)."""
    b, t = check_batch_times(batch_sizes, seconds)
    every = np.arange(b[0], b[-1] + 1)
    best = table(alphas, every, interpolate_batches(b, t, every), c, max_gamma).best_gamma(tolerance)
    ranges: list[tuple[int, int, int]] = []
    for size, g in zip(every.tolist(), best.tolist()):
        if ranges and ranges[-1][2] == g:
            ranges[-1] = (ranges[-1][0], size, g)
        else:
            ranges.append((size, size, g))
    return ranges
