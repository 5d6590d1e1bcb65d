"""Rates derived from counts of accepted draft tokens (store counts, derive rates).

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` (`c_hat`) draft/target time (arithmetic) ratio; `p` target, `q` draft.

The one stored quantity is the histogram of accepted drafts per iteration of Algorithm 1,
`hist[..., n]` = number of iterations that accepted exactly n of their gamma drafts
(shape [..., gamma + 1]). Tokens per iteration count the target's corrected or bonus
token: an iteration that accepts n drafts yields n + 1 tokens.

An engine's counts give alpha_i with 95% intervals (`Acceptance`): per position when it counts
per position, else an i.i.d. alpha from its accepted fraction of drafted tokens
(`alpha_from_fraction`; the model and its caveat: docs/engines.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import FloatArray, IntArray, check_gamma, check_nonnegative
from specdec.simulator.verify_cost import iteration_time


def accepted_histogram(accepted: npt.ArrayLike, gamma: int) -> IntArray:
    """Histogram of accepted counts in 0..gamma over the last axis: [..., n_iter] -> [..., gamma + 1]."""
    n = check_gamma(accepted, name="accepted")
    if n.size and int(n.max()) > gamma:
        raise SpecdecError(f"accepted counts must be <= gamma = {gamma}, got {int(n.max())}")
    return (n[..., None] == np.arange(gamma + 1)).sum(axis=-2).astype(np.int64)


def mean_tokens(hist: npt.ArrayLike) -> FloatArray:
    """Mean tokens per iteration (accepted drafts + 1), from hist [..., gamma + 1]."""
    h = np.asarray(hist, dtype=np.float64)
    return (h * np.arange(1, h.shape[-1] + 1)).sum(axis=-1) / h.sum(axis=-1)


def mean_tokens_standard_error(hist: npt.ArrayLike) -> FloatArray:
    """Standard error of mean_tokens: sample standard deviation / sqrt(iterations)."""
    h = np.asarray(hist, dtype=np.float64)
    tokens = np.arange(1, h.shape[-1] + 1)
    n = h.sum(axis=-1)
    mean = (h * tokens).sum(axis=-1) / n
    var = (h * (tokens - mean[..., None]) ** 2).sum(axis=-1) / (n - 1)
    return np.sqrt(var / n)


def accepted_and_reached(hist: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(accepted_i, reached_i), i = 1..gamma, each [..., gamma], from hist [..., gamma + 1]: draft
    i is reached in the iterations that accepted >= i - 1 drafts and accepted in those with >= i."""
    h = np.asarray(hist)
    at_least = np.cumsum(h[..., ::-1], axis=-1)[..., ::-1]  # [..., gamma + 1]: iterations with >= n accepted
    return at_least[..., 1:], at_least[..., :-1]


def per_position_acceptance(hist: npt.ArrayLike) -> FloatArray:
    """alpha_i = P(draft i accepted | drafts 1..i-1 accepted), i = 1..gamma, shape [..., gamma].

    Draft i is reached in iterations with >= i - 1 accepted and accepted in those with >= i;
    a position never reached gives nan.
    """
    accepted, reached = accepted_and_reached(np.asarray(hist, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        return accepted / reached


def walltime_improvement_from_counts(hist: npt.ArrayLike, c: npt.ArrayLike,
                                     verify_cost: npt.ArrayLike | None = None) -> FloatArray:
    """Simulated speedup: mean tokens per iteration / iteration time gamma c + v(gamma + 1)."""
    gamma = np.shape(hist)[-1] - 1
    return mean_tokens(hist) / iteration_time(gamma, c, verify_cost)


def operation_increase_from_counts(hist: npt.ArrayLike, c_hat: npt.ArrayLike) -> FloatArray:
    """Simulated operations per token relative to plain decoding: (gamma c_hat + gamma + 1) / mean tokens."""
    gamma = np.shape(hist)[-1] - 1
    return (gamma * check_nonnegative(c_hat, "c_hat") + gamma + 1.0) / mean_tokens(hist)


def wilson_interval(successes: npt.ArrayLike, trials: npt.ArrayLike, z: float = 1.959964) -> tuple[FloatArray, FloatArray]:
    """Wilson score interval of a binomial proportion (95% by default); [0, 1] where trials == 0."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n > 0, k / n, 0.5)
        denom = 1 + z ** 2 / n
        centre = (p + z ** 2 / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z ** 2 / (4 * n ** 2)) / denom
    return np.where(n > 0, np.clip(centre - half, 0, 1), 0.0), np.where(n > 0, np.clip(centre + half, 0, 1), 1.0)


def conditional_from_cumulative(drafts: int, at_least: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    """(accepted_i, reached_i) per position from an engine's cumulative counts: at_least[i] =
    drafts whose first i + 1 tokens were all accepted (vLLM's per-position counter), drafts =
    drafts made. Position i is reached by the drafts that accepted positions before it."""
    a = np.asarray(at_least, dtype=np.int64)
    if drafts < 0 or a.ndim != 1 or a.size == 0 or a.min() < 0:
        raise SpecdecError("need drafts >= 0 and a non-empty list of non-negative per-position counts")
    reached = np.concatenate([[drafts], a[:-1]])
    if np.any(a > reached):
        i = int(np.argmax(a > reached))
        raise SpecdecError(f"per-position counts must not grow with the position: position {i} has {int(a[i])} "
                           f"accepted of {int(reached[i])} reaching it")
    return a, reached


def check_conditional(accepted: npt.ArrayLike, reached: npt.ArrayLike) -> None:
    """Per-position counts a decoder can produce: accepted_i <= reached_i, and only drafts that
    accepted position i reach position i + 1 (reached_{i+1} <= accepted_i)."""
    a, r = np.asarray(accepted, dtype=np.int64), np.asarray(reached, dtype=np.int64)
    if a.shape != r.shape or a.ndim != 1:
        raise SpecdecError("accepted and reached need one count per draft position each")
    over = np.nonzero(a > r)[0]
    if over.size:
        i = int(over[0])
        raise SpecdecError(f"position {i + 1}: {int(a[i])} accepted of {int(r[i])} reaching it")
    grow = np.nonzero(r[1:] > a[:-1])[0]
    if grow.size:
        i = int(grow[0])
        raise SpecdecError(f"position {i + 2} is reached by {int(r[i + 1])} drafts, but only {int(a[i])} accepted "
                           f"position {i + 1}: reached counts cannot grow past the accepted ones")


@dataclass(frozen=True)
class Acceptance:
    """Per-position acceptance alpha_1..alpha_K measured from counts, with 95% intervals."""

    alphas: tuple[float, ...]  # alpha_1..alpha_K
    intervals: tuple[tuple[float, float] | None, ...]  # (low, high) per position, 95%; None: no counts, no interval
    model: str  # "per-position counts", or the i.i.d. model's statement with its caveat
    k_observed: int  # draft lengths the counts cover: positions measured, or the drafts' length k (i.i.d.)
    counts: dict[str, Any]  # the counts they came from (accepted/reached per position, or token totals)


def iid_fraction(alpha: npt.ArrayLike, k: int) -> FloatArray:
    """Expected accepted fraction of k-token drafts under i.i.d. alpha: sum_{i<=k} alpha^i / k (shape of alpha)."""
    a = np.asarray(alpha, dtype=np.float64)
    return (a[..., None] ** np.arange(1, k + 1)).sum(-1) / k


def alpha_from_fraction(r: float, k: int) -> float:
    """The alpha in [0, 1] whose i.i.d. accepted fraction of k-token drafts is r (bisection: the
    fraction rises with alpha)."""
    if not 0 <= r <= 1:
        raise SpecdecError(f"an accepted fraction must lie in [0, 1], got {r}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if iid_fraction(mid, k) < r else (lo, mid)
    return (lo + hi) / 2
