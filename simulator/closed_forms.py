"""The closed forms of Leviathan et al. (ICML 2023), Section 3, broadcasting over alpha, gamma, c.

Names follow the paper: `alpha` acceptance rate, `gamma` draft tokens per iteration, `c`
(`c_hat`) draft/target time (arithmetic) ratio. Each formula and its source: docs/theory.md.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specdec.simulator.checks import FloatArray, check_alpha, check_gamma, check_nonnegative


def geometric_sum(alpha: FloatArray, n: npt.ArrayLike) -> FloatArray:
    """sum_{k=0}^{n-1} alpha^k = (1 - alpha^n) / (1 - alpha) for n >= 1, with its limit n at alpha = 1.

    Evaluated as -expm1(n log alpha) / (1 - alpha), which stays accurate as alpha -> 1
    (no cancellation in 1 - alpha^n); exactly 1 at alpha = 0 and at n = 1 (gamma = 0, so
    "do not speculate" has speedup exactly 1). Inputs are not checked.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha_pow_minus_one = np.expm1(n * np.log(alpha))  # alpha^n - 1
        total = np.where(alpha == 1.0, n, -alpha_pow_minus_one / (1.0 - alpha))
    return np.where(n == 1, 1.0, total).astype(np.float64)


def expected_tokens(alpha: npt.ArrayLike, gamma: npt.ArrayLike) -> FloatArray:
    """Expected tokens per iteration of Algorithm 1 (Equation 1): (1 - alpha^(gamma+1)) / (1 - alpha).

    The number of tokens is a geometric variable capped at gamma + 1; the limit at alpha = 1
    is gamma + 1 and the value at alpha = 0 is 1.
    """
    a = check_alpha(alpha)
    g = check_gamma(gamma)
    return geometric_sum(a, g + 1)


def walltime_improvement(alpha: npt.ArrayLike, gamma: npt.ArrayLike, c: npt.ArrayLike) -> FloatArray:
    """Expected walltime improvement (speedup) of Theorem 8: (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)).

    Assumes gamma + 1 target evaluations in parallel cost one target step.
    gamma = 0 (no speculation) gives exactly 1.
    """
    c = check_nonnegative(c, "c")
    g = check_gamma(gamma)
    return expected_tokens(alpha, g) / (g * c + 1.0)


def operation_increase(alpha: npt.ArrayLike, gamma: npt.ArrayLike, c_hat: npt.ArrayLike) -> FloatArray:
    """Expected factor of increase in total arithmetic operations (Theorem 10).

    (1 - alpha)(gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1)): one iteration does gamma
    draft steps and gamma + 1 target evaluations, divided by the tokens it yields (Eq. 1).
    """
    c_hat = check_nonnegative(c_hat, "c_hat")
    g = check_gamma(gamma)
    return (g * c_hat + g + 1.0) / expected_tokens(alpha, g)


def memory_access_reduction(alpha: npt.ArrayLike, gamma: npt.ArrayLike) -> FloatArray:
    """Factor by which reads of the target model's weights and KV cache shrink (Section 3.4).

    The target's weights and KV cache are read once per iteration of Algorithm 1 instead of
    once per generated token, so the number of such reads drops by the expected tokens per
    iteration, (1 - alpha^(gamma+1)) / (1 - alpha) (Eq. 1). Values > 1 mean fewer reads.
    As in the paper, the draft model's own memory reads are not counted.
    """
    return expected_tokens(alpha, gamma)


def gamma1_walltime_improvement(alpha: npt.ArrayLike, c: npt.ArrayLike) -> FloatArray:
    """Theorem 8 at gamma = 1, the guarantee of Corollary 9: (1 + alpha) / (1 + c)."""
    a = check_alpha(alpha)
    c = check_nonnegative(c, "c")
    return (1.0 + a) / (1.0 + c)


def speculation_helps(alpha: npt.ArrayLike, c: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether some gamma >= 1 improves walltime (Corollary 9): exactly when alpha > c.

    Corollary 9 gives the "if"; the "only if" holds because the speedup of Theorem 8 rises
    and then falls in gamma (see simulator.optimal), so if gamma = 1, with speedup
    (1 + alpha)/(1 + c) <= 1, does not improve, no larger gamma does.
    """
    return check_alpha(alpha) > check_nonnegative(c, "c")


def oracle_expected_tokens(alpha: npt.ArrayLike) -> FloatArray:
    """Expected tokens per iteration with an oracle for gamma (Section 3.5): 1 / (1 - alpha).

    The oracle drafts exactly the tokens that will be accepted, so each iteration yields a
    geometric number of tokens with no cap. Needs alpha < 1.
    """
    a = check_alpha(alpha, allow_one=False)
    return 1.0 / (1.0 - a)


def oracle_walltime_improvement(alpha: npt.ArrayLike, c: npt.ArrayLike) -> FloatArray:
    """Walltime improvement with an oracle for gamma (Section 3.5): 1 / (1 - alpha + alpha c).

    Per iteration the oracle runs the draft model once per accepted token, alpha / (1 - alpha)
    times on average, and the target model once to verify (footnote 4: the bound keeps
    the verification), so the speedup is (1/(1-alpha)) / (1 + c alpha/(1-alpha)). At c = 0
    it is the bound 1/(1-alpha) of Section 3.6; for typical alpha and c it is up to about
    60% above the best fixed gamma, as Section 3.5 states.
    """
    a = check_alpha(alpha, allow_one=False)
    c = check_nonnegative(c, "c")
    return 1.0 / (1.0 - a + a * c)
