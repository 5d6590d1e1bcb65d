"""The paper's closed forms (Leviathan et al. 2023, Sections 3.1-3.6): limits, identities, printed numbers.

Names follow the paper: alpha acceptance rate, gamma draft tokens, c / c_hat cost ratios.
The Monte-Carlo checks of the same formulas are in test_simulator_montecarlo.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.simulator import (expected_tokens, gamma1_walltime_improvement, memory_access_reduction, operation_increase,
                       optimal_gamma, oracle_expected_tokens, oracle_walltime_improvement, speculation_helps,
                       walltime_improvement)


def direct_sum(alpha: float, gamma: int) -> float:
    """Eq. 1 as the capped-geometric expectation sum_{k=0}^{gamma} alpha^k, term by term."""
    return float(sum(alpha ** k for k in range(gamma + 1)))


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 0.62, 0.9, 0.999])
@pytest.mark.parametrize("gamma", [0, 1, 2, 7, 30])
def test_expected_tokens_is_the_capped_geometric_mean(alpha: float, gamma: int) -> None:
    assert expected_tokens(alpha, gamma) == pytest.approx(direct_sum(alpha, gamma), rel=1e-12)


def test_expected_tokens_limits() -> None:
    gammas = np.arange(0, 20)
    assert np.array_equal(expected_tokens(1.0, gammas), gammas + 1.0)  # alpha -> 1 limit, exactly
    assert np.array_equal(expected_tokens(0.0, gammas), np.ones(20))  # alpha = 0: only the target's token
    assert np.array_equal(expected_tokens(np.linspace(0, 1, 11), 0), np.ones(11))  # gamma = 0
    # Near alpha = 1 the value approaches gamma + 1 without cancellation error.
    for eps in (1e-6, 1e-10, 1e-14):
        assert expected_tokens(1.0 - eps, 10) == pytest.approx(11.0 - 55.0 * eps, rel=1e-9)


def test_closed_forms_broadcast() -> None:
    alpha = np.linspace(0.1, 0.9, 5)[:, None, None]  # [5, 1, 1]
    gamma = np.arange(4)[None, :, None]  # [1, 4, 1]
    c = np.array([0.0, 0.05, 0.2])  # [3]
    speedup = walltime_improvement(alpha, gamma, c)
    assert speedup.shape == (5, 4, 3)
    assert speedup[3, 2, 1] == pytest.approx(direct_sum(0.7, 2) / (2 * 0.05 + 1), rel=1e-12)
    assert operation_increase(alpha, gamma, c).shape == (5, 4, 3)


def test_walltime_improvement_theorem8() -> None:
    # Theorem 8 written out; gamma = 0 (no speculation) is exactly 1 for every alpha and c.
    assert walltime_improvement(0.8, 5, 0.05) == pytest.approx((1 - 0.8 ** 6) / (0.2 * 1.25), rel=1e-12)
    assert np.all(walltime_improvement(np.linspace(0, 1, 11), 0, np.linspace(0, 1, 11)) == 1.0)


def test_operation_increase_theorem10() -> None:
    assert operation_increase(0.8, 5, 0.1) == pytest.approx(0.2 * (5 * 0.1 + 5 + 1) / (1 - 0.8 ** 6), rel=1e-12)
    assert operation_increase(0.3, 0, 0.5) == 1.0
    # alpha = 1 wastes nothing: operations grow only by the draft's share.
    assert operation_increase(1.0, 4, 0.0) == pytest.approx(1.0)


def test_memory_access_reduction_is_tokens_per_iteration() -> None:
    # Section 3.4: target weights and KV cache are read once per iteration, i.e. E(tokens) times less often.
    alpha = np.linspace(0, 0.95, 20)
    assert np.array_equal(memory_access_reduction(alpha, 6), expected_tokens(alpha, 6))


PAPER_TABLE1 = [(0.6, 2, 1.53, 1.96), (0.7, 3, 1.58, 2.53), (0.8, 2, 1.23, 2.44),
                (0.8, 5, 1.63, 3.69), (0.9, 2, 1.11, 2.71), (0.9, 10, 1.60, 6.86)]


@pytest.mark.parametrize("alpha,gamma,operations,speed", PAPER_TABLE1)
def test_table1(alpha: float, gamma: int, operations: float, speed: float) -> None:
    assert round(float(operation_increase(alpha, gamma, 0.0)), 2) == operations
    assert round(float(walltime_improvement(alpha, gamma, 0.0)), 2) == speed


def test_corollary9_gamma1() -> None:
    alpha = np.linspace(0, 0.99, 100)[:, None]
    c = np.linspace(0, 1.0, 101)[None, :]
    assert np.allclose(gamma1_walltime_improvement(alpha, c), walltime_improvement(alpha, 1, c), rtol=1e-12)
    helps = speculation_helps(alpha, c)
    assert np.array_equal(helps, alpha > c)
    assert np.array_equal(gamma1_walltime_improvement(alpha, c) > 1.0, helps)
    # And the optimum improves at least as much as gamma = 1 wherever alpha > c.
    best = optimal_gamma(alpha, c)
    assert np.all(best.walltime_improvement[helps] >= gamma1_walltime_improvement(alpha, c)[helps] * (1 - 1e-12))


def test_oracle_bound_section35() -> None:
    alpha = np.linspace(0, 0.99, 100)
    assert np.allclose(oracle_expected_tokens(alpha), 1 / (1 - alpha), rtol=1e-12)
    # Fixed gamma approaches the oracle's tokens from below as gamma grows (Section 3.6 bound).
    assert np.all(expected_tokens(alpha, 200) <= oracle_expected_tokens(alpha) * (1 + 1e-12))
    # With c = 0 the oracle speedup is the same bound 1/(1 - alpha).
    assert np.allclose(oracle_walltime_improvement(alpha, 0.0), 1 / (1 - alpha), rtol=1e-12)
    # The oracle beats every fixed gamma, and by "up to ~60%" for typical alpha and c (Section 3.5).
    a, c = np.meshgrid(np.linspace(0.5, 0.99, 50), [0.01, 0.02, 0.05, 0.1], indexing="ij")
    gain = oracle_walltime_improvement(a, c) / optimal_gamma(a, c, max_gamma=1000).walltime_improvement
    assert np.all(gain >= 1.0)
    assert 1.5 < gain.max() < 1.65


def test_numbers_stated_in_the_paper() -> None:
    # Section 4.2 / 3.6: a bigram draft with alpha ~ 0.2 and c ~ 0 gives 1.25X at gamma = 3.
    assert round(float(walltime_improvement(0.2, 3, 0.0)), 2) == 1.25
    # Appendix A.5, argmax sampling with lenience: alpha 0.75, 0.8, 0.87 at c = 0.015, gamma = 8
    # give 3.3X, 3.9X and 4.9X.
    got = walltime_improvement(np.array([0.75, 0.8, 0.87]), 8, 0.015)
    assert np.array_equal(np.round(got, 1), [3.3, 3.9, 4.9])
