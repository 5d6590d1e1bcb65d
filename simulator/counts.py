"""Rates derived from counts of accepted draft tokens (store counts, derive rates).

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` (`c_hat`) draft/target time (arithmetic) ratio; `p` target, `q` draft.

The one stored quantity is the histogram of accepted drafts per iteration of Algorithm 1,
`hist[..., n]` = number of iterations that accepted exactly n of their gamma drafts
(shape [..., gamma + 1]). Tokens per iteration count the target's corrected or bonus
token: an iteration that accepts n drafts yields n + 1 tokens.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specdec.simulator.validation import FloatArray, IntArray, check_gamma, check_nonnegative
from specdec.simulator.verify_cost import iteration_time


def accepted_histogram(accepted: npt.ArrayLike, gamma: int) -> IntArray:
    """Histogram of accepted counts in 0..gamma over the last axis: [..., n_iter] -> [..., gamma + 1]."""
    n = check_gamma(accepted, name="accepted")
    if n.size and int(n.max()) > gamma:
        raise ValueError(f"accepted counts must be <= gamma = {gamma}, got {int(n.max())}")
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


def per_position_acceptance(hist: npt.ArrayLike) -> FloatArray:
    """alpha_i = P(draft i accepted | drafts 1..i-1 accepted), i = 1..gamma, shape [..., gamma].

    Draft i is reached in iterations with >= i - 1 accepted and accepted in those with >= i;
    a position never reached gives nan.
    """
    h = np.asarray(hist, dtype=np.float64)
    at_least = np.cumsum(h[..., ::-1], axis=-1)[..., ::-1]  # [..., gamma + 1]: iterations with >= n accepted
    with np.errstate(divide="ignore", invalid="ignore"):
        return at_least[..., 1:] / at_least[..., :-1]


def walltime_improvement_from_counts(hist: npt.ArrayLike, c: npt.ArrayLike,
                                     verify_cost: npt.ArrayLike | None = None) -> FloatArray:
    """Simulated speedup: mean tokens per iteration / iteration time gamma c + v(gamma + 1)."""
    gamma = np.shape(hist)[-1] - 1
    return mean_tokens(hist) / iteration_time(gamma, c, verify_cost)


def operation_increase_from_counts(hist: npt.ArrayLike, c_hat: npt.ArrayLike) -> FloatArray:
    """Simulated operations per token relative to plain decoding: (gamma c_hat + gamma + 1) / mean tokens."""
    gamma = np.shape(hist)[-1] - 1
    return (gamma * check_nonnegative(c_hat, "c_hat") + gamma + 1.0) / mean_tokens(hist)
