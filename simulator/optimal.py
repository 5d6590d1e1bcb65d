"""The optimal number of draft tokens gamma for given alpha and c (Section 3.3, Figure 3).

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target time ratio; `p` target, `q` draft distribution.

The optimum is searched over the integers gamma = 0..max_gamma. gamma = 0 means "do not
speculate" (plain decoding, speedup exactly 1); it is chosen when no gamma >= 1 improves,
which under the paper's model happens exactly when alpha <= c (Corollary 9). Ties go to the
smaller gamma.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from specdec.simulator.checks import (FloatArray, IntArray, check_alpha, check_max_gamma,
                                      check_nonnegative)
from specdec.simulator.closed_forms import geometric_sum
from specdec.simulator.verify_cost import iteration_time, max_gamma_for_verify_cost

DEFAULT_MAX_GAMMA = 64


class OptimalGamma(NamedTuple):
    """The best gamma and its walltime improvement, both shaped like the broadcast inputs."""

    gamma: IntArray  # 0 = do not speculate
    walltime_improvement: FloatArray  # exactly 1 where gamma = 0


def best_of_table(speedup_by_gamma: FloatArray) -> OptimalGamma:
    """Argmax over the last axis of a table [..., G + 1] of speedups for gamma = 0..G.

    np.argmax returns the first maximum, so ties (and "nothing beats 1") go to the smaller gamma.
    """
    best = np.argmax(speedup_by_gamma, axis=-1)
    return OptimalGamma(best.astype(np.int64), np.take_along_axis(speedup_by_gamma, best[..., None], -1)[..., 0])


def walltime_improvement_by_gamma(alpha: npt.ArrayLike, c: npt.ArrayLike, max_gamma: int = DEFAULT_MAX_GAMMA,
                                  verify_cost: npt.ArrayLike | None = None) -> FloatArray:
    """Theorem 8 evaluated for every gamma = 0..G at once, along a new last axis.

    Args:
        alpha, c: broadcastable arrays.
        max_gamma: largest gamma G; capped at K - 1 by a verify-cost curve v(1..K).
        verify_cost: v(1..K), shape [K] (see simulator.verify_cost); None is the paper's v == 1.

    Returns:
        Speedups, shape [*broadcast(alpha, c).shape, G + 1]; entry [..., g] is for gamma = g.
    """
    a = check_alpha(alpha)
    c = check_nonnegative(c, "c")
    top = max_gamma_for_verify_cost(verify_cost, check_max_gamma(max_gamma))
    gammas = np.arange(top + 1)  # [G + 1]
    tokens = geometric_sum(a[..., None], gammas + 1)  # [..., G + 1]
    return tokens / iteration_time(gammas, c[..., None], verify_cost)


def optimal_gamma(alpha: npt.ArrayLike, c: npt.ArrayLike, max_gamma: int = DEFAULT_MAX_GAMMA,
                  verify_cost: npt.ArrayLike | None = None) -> OptimalGamma:
    """The gamma in 0..max_gamma that maximises the walltime improvement, and that improvement.

    Under the paper's model (verify_cost None) this is Theorem 8's argmax, found by a
    vectorised binary search (log2(max_gamma) passes over the (alpha, c) arrays instead of
    max_gamma + 1): the speedup f(gamma) rises and then falls in gamma, because
    f(gamma + 1) > f(gamma)  <=>  g(gamma) = alpha^(gamma+1) ((1 - alpha)(gamma c + 1) + c) - c > 0,
    and g is non-increasing: the ratio of consecutive alpha^(gamma+1)(...) terms is at most
    alpha (1 + c (1 - alpha) / (1 - alpha + c)) <= 1, which rearranges to (1 + c)(1 - alpha)^2 >= 0.
    So the optimum is the first gamma >= 1 where f stops rising, or 0 when alpha <= c.
    It equals the argmax of walltime_improvement_by_gamma (tested).

    With a verify-cost curve the speedup need not be unimodal, so every gamma up to
    min(max_gamma, K - 1) is evaluated along an axis and the argmax taken.
    """
    if verify_cost is not None:
        return best_of_table(walltime_improvement_by_gamma(alpha, c, max_gamma, verify_cost))
    a, c = np.broadcast_arrays(check_alpha(alpha), check_nonnegative(c, "c"))
    top = check_max_gamma(max_gamma)
    # Binary lifting for the last gamma in 1..top-1 after which f still rises (0 if none);
    # the optimum is the next gamma. Gammas are held as floats to avoid int->float casts.
    with np.errstate(divide="ignore"):
        log_a = np.log(a)
    one_minus_a = 1.0 - a
    last_rise = np.zeros(a.shape)
    step = 1 << max(top - 1, 0).bit_length() >> 1
    while step:
        candidate = last_rise + step
        rises = _rises_after(a, log_a, one_minus_a, c, candidate) & (candidate <= top - 1)
        last_rise = np.where(rises, candidate, last_rise)
        step >>= 1
    helps = (a > c) & (top > 0)  # Corollary 9: some gamma >= 1 beats plain decoding iff alpha > c
    gamma = np.where(helps, last_rise + 1.0, 0.0).astype(np.int64)
    return OptimalGamma(gamma, geometric_sum(a, gamma + 1) / (gamma * c + 1.0))


def _rises_after(alpha: FloatArray, log_alpha: FloatArray, one_minus_alpha: FloatArray, c: FloatArray,
                 gamma: FloatArray) -> npt.NDArray[np.bool_]:
    """Whether Theorem 8's speedup grows from gamma to gamma + 1 (gamma >= 1, any alpha > c).

    f(gamma + 1) > f(gamma)  <=>  alpha^(gamma+1) ((1 - alpha)(gamma c + 1) + c) > c for alpha < 1;
    at alpha = 1 the speedup (gamma + 1)/(gamma c + 1) rises for every gamma once alpha > c.
    """
    alpha_pow = np.exp((gamma + 1.0) * log_alpha)  # alpha^(gamma+1); 0 at alpha = 0
    return (alpha_pow * (one_minus_alpha * (gamma * c + 1.0) + c) > c) | (alpha == 1.0)
