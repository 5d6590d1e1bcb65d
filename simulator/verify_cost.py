"""Beyond the paper: a verify-cost curve v(k) = t(k) / t(1) in place of "gamma + 1 target
evaluations cost one step": an iteration takes gamma c + v(gamma + 1) target steps.

Names follow Leviathan et al.: `alpha`, `gamma`, `c`. A curve of K values covers gamma <= K - 1
(never extrapolated); v == 1 is the paper's model. Details: docs/theory.md.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import FloatArray, IntArray, check_gamma, check_nonnegative, check_verify_cost
from specdec.simulator.closed_forms import expected_tokens


def verify_cost_at(verify_cost: FloatArray, k: IntArray) -> FloatArray:
    """v(k) for token counts k >= 1 (any shape), from a checked curve [K]; k > K is an error."""
    if k.size and int(k.max()) > verify_cost.shape[0]:
        raise SpecdecError(f"gamma = {int(k.max()) - 1} needs verify_cost for k = {int(k.max())} tokens, but only "
                           f"k = 1..{verify_cost.shape[0]} are given (a curve of K values covers gamma <= K - 1)")
    return verify_cost[k - 1]


def iteration_time(gamma: npt.ArrayLike, c: npt.ArrayLike,
                   verify_cost: npt.ArrayLike | None = None) -> FloatArray:
    """Walltime of one iteration of Algorithm 1, in target steps: gamma c + v(gamma + 1).

    Args:
        gamma: draft tokens per iteration (broadcasts with c).
        c: draft/target time ratio.
        verify_cost: v(1..K), shape [K]; None is the paper's model v == 1 (time gamma c + 1).
    """
    g = check_gamma(gamma)
    c = check_nonnegative(c, "c")
    if verify_cost is None:
        return g * c + 1.0
    return g * c + verify_cost_at(check_verify_cost(verify_cost), g + 1)


def verify_cost_walltime_improvement(alpha: npt.ArrayLike, gamma: npt.ArrayLike, c: npt.ArrayLike,
                                     verify_cost: npt.ArrayLike | None) -> FloatArray:
    """Walltime improvement with a verify-cost curve: E(tokens) / (gamma c + v(gamma + 1)).

    With verify_cost None (v == 1) this is Theorem 8.
    """
    return expected_tokens(alpha, gamma) / iteration_time(gamma, c, verify_cost)


def max_gamma_for_verify_cost(verify_cost: npt.ArrayLike | None, max_gamma: int) -> int:
    """The largest gamma a search may try: max_gamma, capped at K - 1 by a curve v(1..K)."""
    if verify_cost is None:
        return max_gamma
    return min(max_gamma, np.shape(verify_cost)[0] - 1)
