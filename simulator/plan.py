"""A speculative-decoding plan: every quantity `specdec plan` reports, for one setting.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate (or alpha_1..alpha_K per
position), `gamma` draft tokens per iteration, `c` draft/target time ratio, `c_hat`
draft/target arithmetic ratio; `p` target, `q` draft distribution.

make_plan picks the model from its arguments: the paper's i.i.d. alpha (Eq. 1, Theorems 8
and 10, Corollary 9, Section 3.5) or per-position acceptances (simulator.positional), with
either the paper's verify cost v == 1 or a measured curve v(1..K) (simulator.verify_cost).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import (FloatArray, IntArray, check_alpha, check_gamma, check_max_gamma,
                                      check_nonnegative, check_per_position, check_verify_cost)
from specdec.simulator.closed_forms import (expected_tokens, operation_increase, oracle_expected_tokens,
                                            oracle_walltime_improvement)
from specdec.simulator.optimal import DEFAULT_MAX_GAMMA, optimal_gamma
from specdec.simulator.positional import (positional_expected_tokens, positional_operation_increase, positional_optimal_gamma,
                                          positional_walltime_improvement)
from specdec.simulator.verify_cost import max_gamma_for_verify_cost, verify_cost_walltime_improvement


@dataclass(frozen=True)
class Plan:
    """The optimum and a per-gamma table for one (alpha, c, c_hat, verify cost) setting."""

    alpha: float | None  # i.i.d. acceptance rate; None when per-position acceptances are given
    alpha_per_position: tuple[float, ...] | None  # alpha_1..alpha_K, extended with alpha_K
    c: float  # draft/target time ratio
    c_hat: float  # draft/target arithmetic-operations ratio
    verify_cost: tuple[float, ...] | None  # v(1..K); None is the paper's v == 1
    max_gamma: int  # bound of the optimal-gamma search (capped at K - 1 by a verify-cost curve)
    gamma: int  # the evaluated gamma: the one asked for, else the optimum
    optimal_gamma: int  # best gamma in 0..max_gamma; 0 = do not speculate
    gammas: IntArray  # [G + 1]: table rows 0..G, G = max(search bound, gamma)
    expected_tokens: FloatArray  # [G + 1]: tokens per iteration, incl. the target's token
    walltime_improvement: FloatArray  # [G + 1]: speedup (Theorem 8 or its extension)
    operation_increase: FloatArray  # [G + 1]: arithmetic operations factor (Theorem 10)
    oracle_expected_tokens: float | None  # Section 3.5, i.i.d. alpha only
    oracle_walltime_improvement: float | None  # Section 3.5, i.i.d. alpha and v == 1 only

    @property
    def memory_access_reduction(self) -> FloatArray:
        """[G + 1]: target weight/KV reads shrink by the tokens per iteration (Section 3.4)."""
        return self.expected_tokens

    @property
    def gamma1_walltime_improvement(self) -> float | None:
        """Speedup at gamma = 1, (1 + alpha)/(1 + c) under the paper's model (Corollary 9); None if not in the table."""
        return float(self.walltime_improvement[1]) if self.gammas.size > 1 else None

    @property
    def speculation_helps(self) -> bool:
        """Whether some gamma in 1..max_gamma beats plain decoding (alpha > c in the paper's model)."""
        return self.optimal_gamma > 0


def make_plan(c: float, alpha: float | None = None, alpha_per_position: npt.ArrayLike | None = None,
              c_hat: float | None = None, gamma: int | None = None, max_gamma: int = DEFAULT_MAX_GAMMA,
              verify_cost: npt.ArrayLike | None = None) -> Plan:
    """Evaluate one setting: the optimal gamma, the asked-for gamma, and a table over gamma.

    Args:
        c: draft/target time ratio (Definition 7), >= 0.
        alpha: i.i.d. acceptance rate in [0, 1); give it or alpha_per_position.
        alpha_per_position: alpha_1..alpha_K, each in [0, 1], extended with alpha_K beyond K.
        c_hat: draft/target arithmetic ratio for Theorem 10; defaults to c.
        gamma: evaluate this gamma; None evaluates the optimum.
        max_gamma: search bound for the optimum.
        verify_cost: v(1..K) with v(1) = 1 (time of a k-token target pass / a 1-token pass);
            None is the paper's v == 1. It bounds gamma by K - 1.
    """
    if (alpha is None) == (alpha_per_position is None):
        raise SpecdecError("give exactly one of alpha and alpha_per_position (per-position acceptances)")
    c_value = _scalar(check_nonnegative(c, "c"), "c")
    c_hat_value = c_value if c_hat is None else _scalar(check_nonnegative(c_hat, "c_hat"), "c_hat")
    v = None if verify_cost is None else check_verify_cost(verify_cost)
    top = max_gamma_for_verify_cost(v, check_max_gamma(max_gamma))
    asked = None if gamma is None else _scalar(check_gamma(gamma), "gamma")
    size = top if asked is None else max(top, asked)
    gammas = np.arange(size + 1)  # [G + 1]; a verify-cost curve too short for gamma raises below

    if alpha is not None:
        a = _scalar(check_alpha(alpha, allow_one=False), "alpha")
        per_position = None
        tokens = expected_tokens(a, gammas)
        speedup = verify_cost_walltime_improvement(a, gammas, c_value, v)
        operations = operation_increase(a, gammas, c_hat_value)
        best = int(optimal_gamma(a, c_value, top, v).gamma)
        oracle_tokens = float(oracle_expected_tokens(a))
        oracle_speedup = None if v is not None else float(oracle_walltime_improvement(a, c_value))
    else:
        alphas = check_per_position(alpha_per_position)
        if alphas.ndim != 1:
            raise SpecdecError(f"per-position acceptances must be one list alpha_1..alpha_K, got shape {alphas.shape}")
        a, per_position = None, tuple(float(x) for x in alphas)
        tokens = positional_expected_tokens(alphas, gammas)
        speedup = positional_walltime_improvement(alphas, gammas, c_value, v)
        operations = positional_operation_increase(alphas, gammas, c_hat_value)
        best = int(positional_optimal_gamma(alphas, c_value, top, v).gamma)
        oracle_tokens = oracle_speedup = None

    return Plan(alpha=a, alpha_per_position=per_position, c=c_value, c_hat=c_hat_value,
                verify_cost=None if v is None else tuple(float(x) for x in v), max_gamma=top,
                gamma=best if asked is None else asked, optimal_gamma=best,
                gammas=gammas, expected_tokens=tokens, walltime_improvement=speedup, operation_increase=operations,
                oracle_expected_tokens=oracle_tokens, oracle_walltime_improvement=oracle_speedup)


def _scalar(value: np.ndarray, name: str) -> Any:
    """A 0-d checked array as a Python number."""
    if np.ndim(value) != 0:
        raise SpecdecError(f"{name} must be a single number, got shape {np.shape(value)}")
    return value.item()
