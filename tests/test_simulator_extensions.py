"""Beyond the paper: per-position acceptance and a verify-cost curve, and their reduction to the paper.

Names follow the paper: alpha acceptance rate, gamma draft tokens, c / c_hat cost ratios.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.report import plan_dict
from specdec.simulator import (expected_tokens, extend_per_position, iteration_time, make_plan, operation_increase,
                       optimal_gamma, positional_expected_tokens, positional_operation_increase,
                       positional_optimal_gamma, positional_walltime_improvement,
                       verify_cost_walltime_improvement, walltime_improvement)

ALPHAS = np.linspace(0.0, 0.99, 34)
GAMMAS = np.arange(0, 21)
CS = np.array([0.0, 0.01, 0.05, 0.3])


def test_constant_per_position_acceptance_is_equation1_and_theorems_8_10() -> None:
    grid_a = ALPHAS[:, None]  # [34, 1], against GAMMAS [21]
    constant = np.broadcast_to(ALPHAS[:, None, None], (34, 1, 20))  # alpha_i = alpha for i = 1..20
    assert np.allclose(positional_expected_tokens(constant, GAMMAS), expected_tokens(grid_a, GAMMAS),
                       rtol=1e-12, atol=0)
    for c in CS:
        assert np.allclose(positional_walltime_improvement(constant, GAMMAS, c),
                           walltime_improvement(grid_a, GAMMAS, c), rtol=1e-12, atol=0)
        assert np.allclose(positional_operation_increase(constant, GAMMAS, c),
                           operation_increase(grid_a, GAMMAS, c), rtol=1e-12, atol=0)
        fast, brute = optimal_gamma(ALPHAS, c, 20), positional_optimal_gamma(constant[:, 0], c, 20)
        assert np.allclose(fast.walltime_improvement, brute.walltime_improvement, rtol=1e-12, atol=0)


def test_flat_verify_cost_is_theorem8() -> None:
    ones = np.ones(40)  # v(k) = 1 for k = 1..40: the paper's model
    grid_a, grid_g, grid_c = ALPHAS[:, None, None], GAMMAS[None, :, None], CS[None, None, :]
    assert np.array_equal(iteration_time(grid_g, grid_c, ones), iteration_time(grid_g, grid_c))
    assert np.array_equal(verify_cost_walltime_improvement(grid_a, grid_g, grid_c, ones),
                          walltime_improvement(grid_a, grid_g, grid_c))
    with_curve = optimal_gamma(ALPHAS[:, None], CS[None, :], 39, verify_cost=ones)
    paper = optimal_gamma(ALPHAS[:, None], CS[None, :], 39)
    assert np.allclose(with_curve.walltime_improvement, paper.walltime_improvement, rtol=1e-12, atol=0)


def test_per_position_formula() -> None:
    alphas = [0.9, 0.8, 0.5]
    # 1 + 0.9 + 0.9*0.8 + 0.9*0.8*0.5, and beyond K = 3 the last value 0.5 is reused.
    assert positional_expected_tokens(alphas, 3) == pytest.approx(1 + 0.9 + 0.72 + 0.36)
    assert positional_expected_tokens(alphas, 5) == pytest.approx(1 + 0.9 + 0.72 + 0.36 + 0.18 + 0.09)
    assert np.array_equal(extend_per_position(alphas, 5), [0.9, 0.8, 0.5, 0.5, 0.5])
    assert np.array_equal(extend_per_position(alphas, 2), [0.9, 0.8])
    assert positional_expected_tokens([1.0], 7) == 8.0  # alpha_i = 1: the gamma + 1 limit
    speed = positional_walltime_improvement(alphas, 2, 0.1, verify_cost=[1.0, 1.2, 1.5])
    assert speed == pytest.approx((1 + 0.9 + 0.72) / (2 * 0.1 + 1.5))


def test_optimum_with_a_verify_cost_that_breaks_unimodality() -> None:
    # A 3-token pass costs 3x, longer ones no more: the speedup dips at gamma = 2, then climbs
    # past its gamma = 1 value, so a rise-then-fall search would stop too early.
    verify_cost = np.array([1.0, 1.0] + [3.0] * 19)  # v(1..21)
    speed = verify_cost_walltime_improvement(0.9, np.arange(21), 0.01, verify_cost)
    assert speed[2] < speed[1] < speed[20]
    for best in (optimal_gamma(0.9, 0.01, verify_cost=verify_cost),
                 positional_optimal_gamma([0.9], 0.01, verify_cost=verify_cost)):
        assert best.gamma == np.argmax(speed) == 20
        assert best.walltime_improvement == pytest.approx(speed.max(), rel=1e-12)


def test_nothing_beats_plain_decoding() -> None:
    # With v == 1, alpha_1 <= c bounds E(gamma) <= 1 + gamma c, so gamma 0 wins with speedup exactly 1.
    none = positional_optimal_gamma([0.05, 1.0, 1.0], c=0.1)
    assert none.gamma == 0 and none.walltime_improvement == 1.0


def test_per_position_broadcasts_leading_axes() -> None:
    alphas = np.array([[0.9, 0.8], [0.5, 0.4]])  # two profiles
    tokens = positional_expected_tokens(alphas, np.array([[0], [1], [2]]))
    assert tokens.shape == (3, 2)
    assert tokens[2] == pytest.approx([1 + 0.9 + 0.72, 1 + 0.5 + 0.2])
    assert positional_optimal_gamma(alphas, np.array([[0.01], [0.2]])).gamma.shape == (2, 2)


def test_verify_cost_curve_changes_the_optimum_and_bounds_gamma() -> None:
    cpu_like = np.concatenate([[1.0], np.linspace(1.5, 2.0, 15)])  # v(1..16)
    best = optimal_gamma(0.8, 0.05, verify_cost=cpu_like)
    assert best.gamma <= 15  # a curve of K = 16 values covers gamma <= 15
    assert best.walltime_improvement == pytest.approx(
        float(expected_tokens(0.8, best.gamma)) / (0.05 * best.gamma + cpu_like[best.gamma]))
    assert best.walltime_improvement < optimal_gamma(0.8, 0.05).walltime_improvement
    with pytest.raises(ValueError, match="gamma = 16 needs verify_cost for k = 17 tokens"):
        verify_cost_walltime_improvement(0.8, 16, 0.05, cpu_like)


def test_plan_reduces_to_the_paper() -> None:
    paper = plan_dict(make_plan(c=0.05, alpha=0.8, max_gamma=20))
    positional = plan_dict(make_plan(c=0.05, alpha_per_position=[0.8], max_gamma=20))
    flat = plan_dict(make_plan(c=0.05, alpha=0.8, max_gamma=20, verify_cost=np.ones(21)))
    for other in (positional, flat):
        assert other["gamma"] == paper["gamma"] == 8
        for key in ("expected_tokens", "speedup", "op_increase", "memory_reduction", "gamma1_speedup"):
            assert other[key] == pytest.approx(paper[key], rel=1e-12)
    assert paper["gamma1_speedup"] == pytest.approx(1.8 / 1.05)  # Corollary 9
