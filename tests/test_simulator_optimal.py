"""The optimal gamma (Section 3.3, Figure 3): the fast search equals the brute-force argmax over gamma.

Names follow the paper: alpha acceptance rate, gamma draft tokens, c draft/target time ratio.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.simulator import optimal_gamma, walltime_improvement, walltime_improvement_by_gamma
from specdec.simulator.optimal import best_of_table


def assert_same_optimum(alpha: np.ndarray, c: np.ndarray, max_gamma: int) -> None:
    """optimal_gamma against the argmax of the full [..., max_gamma + 1] table.

    Speedups must agree; gammas must agree wherever the best speedup is not tied (to 1e-12)
    with another gamma's, since float rounding may break exact ties either way.
    """
    fast = optimal_gamma(alpha, c, max_gamma)
    table = walltime_improvement_by_gamma(alpha, c, max_gamma)
    brute = best_of_table(table)
    assert np.allclose(fast.walltime_improvement, brute.walltime_improvement, rtol=1e-12, atol=0)
    second = np.sort(table, axis=-1)[..., -2] if max_gamma > 0 else np.zeros(table.shape[:-1])
    untied = brute.walltime_improvement - second > 1e-12 * brute.walltime_improvement
    assert np.array_equal(fast.gamma[untied], brute.gamma[untied])


def test_matches_argmax_on_random_points() -> None:
    rng = np.random.default_rng(20231121)
    alpha = rng.random(20_000)
    c = rng.random(20_000) * rng.choice([0.02, 0.2, 1.5], size=20_000)
    for max_gamma in (0, 1, 2, 3, 7, 64):
        assert_same_optimum(alpha, c, max_gamma)


def test_matches_argmax_on_a_grid_with_edges() -> None:
    alpha = np.concatenate([np.linspace(0, 0.999, 300), [1.0]])[:, None]
    c = np.concatenate([[0.0], np.geomspace(1e-4, 2.0, 60)])[None, :]
    assert_same_optimum(alpha, c, 64)


def test_no_speculation_when_alpha_at_most_c() -> None:
    alpha = np.array([0.0, 0.1, 0.3, 0.3, 0.5, 1.0])
    c = np.array([0.0, 0.1, 0.3, 0.4, 0.9, 1.0])
    best = optimal_gamma(alpha, c)
    assert np.array_equal(best.gamma, np.zeros(6, dtype=np.int64))
    assert np.array_equal(best.walltime_improvement, np.ones(6))  # exactly 1: plain decoding


def test_speculation_when_alpha_above_c() -> None:
    best = optimal_gamma(np.array([0.11, 0.8, 0.9, 1.0]), np.array([0.1, 0.05, 0.02, 0.5]))
    assert np.all(best.gamma >= 1)
    assert np.all(best.walltime_improvement > 1)
    assert best.gamma[3] == 64  # alpha = 1: every extra draft is accepted, so take as many as allowed


def test_search_bound_and_zero_cost() -> None:
    # c = 0: the speedup grows with every gamma, so the optimum is the bound.
    assert optimal_gamma(0.5, 0.0, max_gamma=10).gamma == 10
    assert optimal_gamma(0.5, 0.0, max_gamma=0).gamma == 0
    best = optimal_gamma(0.9, 0.01, max_gamma=5)
    assert best.gamma == 5 and best.walltime_improvement == pytest.approx(walltime_improvement(0.9, 5, 0.01))


def test_known_optima() -> None:
    # Worked by hand from Theorem 8: alpha 0.8, c 0.05 -> gamma 8 (3.092X); alpha 0.6, c 0.02 -> 6.
    assert optimal_gamma(0.8, 0.05).gamma == 8
    assert optimal_gamma(0.8, 0.05).walltime_improvement == pytest.approx(3.0921, abs=1e-4)
    assert optimal_gamma(0.6, 0.02).gamma == 6


def test_table_shape() -> None:
    table = walltime_improvement_by_gamma(np.array([0.5, 0.7]), np.array([[0.0], [0.1], [0.2]]), max_gamma=9)
    assert table.shape == (3, 2, 10)
    assert np.all(table[..., 0] == 1.0)
