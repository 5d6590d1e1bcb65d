"""Beyond the paper: per-position acceptance alpha_1, alpha_2, ... instead of one i.i.d. alpha,
so E(tokens per iteration) = 1 + sum_i prod_{j<=i} alpha_j (Eq. 1 when all are equal).

Names follow Leviathan et al.: `alpha`, `gamma`, `c` (`c_hat`). Acceptances lie along the last
axis [..., K]; gamma > K reuses alpha_K. Details: docs/theory.md.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specdec.simulator.checks import (FloatArray, IntArray, check_gamma, check_max_gamma, check_nonnegative,
                                      check_per_position)
from specdec.simulator.optimal import DEFAULT_MAX_GAMMA, OptimalGamma, best_of_table
from specdec.simulator.verify_cost import iteration_time, max_gamma_for_verify_cost


def extend_per_position(alphas: npt.ArrayLike, length: int) -> FloatArray:
    """alpha_1..alpha_length, shape [..., length]: truncated, or padded with the last value alpha_K."""
    a = check_per_position(alphas)
    if length <= a.shape[-1]:
        return a[..., :length]
    pad = np.broadcast_to(a[..., -1:], a.shape[:-1] + (length - a.shape[-1],))
    return np.concatenate([a, pad], axis=-1)


def positional_expected_tokens_by_gamma(alphas: npt.ArrayLike, max_gamma: int) -> FloatArray:
    """E(tokens per iteration) for gamma = 0..max_gamma, shape [..., max_gamma + 1]."""
    top = check_max_gamma(max_gamma)
    survive = np.cumprod(extend_per_position(alphas, top), axis=-1)  # [..., G]: P(>= i drafts accepted)
    zero = np.zeros(survive.shape[:-1] + (1,))
    return 1.0 + np.concatenate([zero, np.cumsum(survive, axis=-1)], axis=-1)


def positional_expected_tokens(alphas: npt.ArrayLike, gamma: npt.ArrayLike) -> FloatArray:
    """E(tokens per iteration) = 1 + sum_{i<=gamma} prod_{j<=i} alpha_j; shape broadcast(alphas[..., 0], gamma)."""
    g = check_gamma(gamma)
    table = positional_expected_tokens_by_gamma(alphas, int(g.max(initial=0)))
    return _at_gamma(table, g)


def positional_walltime_improvement(alphas: npt.ArrayLike, gamma: npt.ArrayLike, c: npt.ArrayLike,
                                    verify_cost: npt.ArrayLike | None = None) -> FloatArray:
    """Theorem 8 with per-position acceptance: E(tokens) / (gamma c + v(gamma + 1)), v == 1 by default."""
    return positional_expected_tokens(alphas, gamma) / iteration_time(gamma, c, verify_cost)


def positional_operation_increase(alphas: npt.ArrayLike, gamma: npt.ArrayLike, c_hat: npt.ArrayLike) -> FloatArray:
    """Theorem 10 with per-position acceptance: (gamma c_hat + gamma + 1) / E(tokens)."""
    g = check_gamma(gamma)
    c_hat = check_nonnegative(c_hat, "c_hat")
    return (g * c_hat + g + 1.0) / positional_expected_tokens(alphas, g)


def positional_optimal_gamma(alphas: npt.ArrayLike, c: npt.ArrayLike, max_gamma: int = DEFAULT_MAX_GAMMA,
                             verify_cost: npt.ArrayLike | None = None) -> OptimalGamma:
    """The best gamma in 0..max_gamma (capped at K - 1 by a verify-cost curve v(1..K)) and its speedup.

    Every gamma is evaluated along an axis and the argmax taken; ties and "nothing beats 1"
    go to the smaller gamma. (With v == 1 the speedup still rises then falls, since the
    increments prod_{j<=i} alpha_j of E never grow; a verify-cost curve can break that.)
    """
    c = check_nonnegative(c, "c")
    top = max_gamma_for_verify_cost(verify_cost, check_max_gamma(max_gamma))
    gammas = np.arange(top + 1)
    tokens = positional_expected_tokens_by_gamma(alphas, top)  # [..., G + 1]
    return best_of_table(tokens / iteration_time(gammas, c[..., None], verify_cost))


def _at_gamma(table: FloatArray, gamma: IntArray) -> FloatArray:
    """table[..., gamma] with the leading axes of table broadcast against gamma."""
    shape = np.broadcast_shapes(table.shape[:-1], gamma.shape)
    table = np.broadcast_to(table, shape + table.shape[-1:])
    return np.take_along_axis(table, np.broadcast_to(gamma, shape)[..., None], axis=-1)[..., 0]
