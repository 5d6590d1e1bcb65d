"""Dynamic draft length (specdec.simulator.dynamic): every closed form against a Monte Carlo of
the same rule; the threshold with tau = 0 and n_min = n_max = gamma is the fixed-gamma formula;
the heuristic schedule's stationary law against a simulated chain; the break-even rule at
least as fast as every fixed gamma and every threshold on two laws."""
from __future__ import annotations

import numpy as np
import pytest

from specdec.errors import SpecdecError
from specdec.simulator.dynamic import ConfidenceLaw, heuristic_schedule, optimal_stopping, threshold_prediction
from specdec.simulator.dynamic_monte_carlo import break_even_rule, simulate_rule, threshold_rule
from specdec.simulator.positional import positional_expected_tokens, positional_walltime_improvement

EDGES = np.linspace(0.0, 1.0, 6)
V = np.array([1.0, 1.05, 1.1, 1.2, 1.3, 1.4, 1.5, 1.7, 1.9])
# a draft whose confidence says much (acceptance rises with it), drifting lower along the draft
SHARP = ConfidenceLaw(EDGES, [[0.1, 0.15, 0.2, 0.25, 0.3], [0.2, 0.2, 0.2, 0.2, 0.2], [0.3, 0.25, 0.2, 0.15, 0.1]],
                      [[0.1, 0.3, 0.5, 0.8, 0.95]] * 3)
# one whose confidence says little
FLAT = ConfidenceLaw(EDGES, [[0.2] * 5], [[0.55, 0.6, 0.65, 0.7, 0.75]])
MC = 40_000


@pytest.mark.parametrize("law", [SHARP, FLAT], ids=["sharp", "flat"])
@pytest.mark.parametrize("tau,n_min,n_max", [(0.4, 1, 6), (0.6, 0, 5), (0.8, 2, 8), (0.2, 0, 3)])
@pytest.mark.parametrize("keep_last", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize("c", [0.1, [0.3, 0.2, 0.15, 0.1]], ids=["c", "c-per-forward-count"])
def test_threshold_closed_form_equals_its_monte_carlo(law, tau, n_min, n_max, keep_last, c) -> None:
    got = threshold_prediction(law, [tau], n_min, n_max, c, V, keep_last)
    look, draft = threshold_rule(law, tau, n_min, keep_last)
    sim = simulate_rule(law, look, draft, c, n_max, V, MC, np.random.default_rng(1))
    for field in ("expected_tokens", "expected_drafts", "expected_forwards", "iteration_time", "speedup"):
        assert getattr(got, field)[0] == pytest.approx(getattr(sim, field)[0], rel=0.015, abs=0.01), field


def test_tau_zero_with_n_min_equal_n_max_is_the_fixed_gamma_formula() -> None:
    for gamma in range(1, 8):
        got = threshold_prediction(SHARP, [0.0], gamma, gamma, 0.07, V)
        alphas = SHARP.alphas(gamma)
        assert got.expected_tokens[0] == pytest.approx(positional_expected_tokens(alphas, gamma))
        assert got.expected_forwards[0] == gamma and got.iteration_time[0] == pytest.approx(gamma * 0.07 + V[gamma])
        assert got.speedup[0] == pytest.approx(positional_walltime_improvement(alphas, gamma, 0.07, V))


def test_thresholds_broadcast_and_a_higher_tau_drafts_less() -> None:
    taus = EDGES[:-1]
    got = threshold_prediction(SHARP, taus, 0, 8, 0.05, V)
    assert got.speedup.shape == (5,) and np.all(np.diff(got.expected_drafts) < 0)
    for i, tau in enumerate(taus):
        assert got.speedup[i] == pytest.approx(threshold_prediction(SHARP, [tau], 0, 8, 0.05, V).speedup[0])


@pytest.mark.parametrize("tau", [0.0, 0.4])
def test_heuristic_schedule_equals_a_simulated_chain(tau) -> None:
    cap, c = 10, 0.1
    got = heuristic_schedule(SHARP, c, V, cap=cap, tau=tau)
    assert got.stationary.sum() == pytest.approx(1.0) and np.all(got.stationary >= 0)
    rng = np.random.default_rng(2)
    n, tokens, time, visits = 5, 0.0, 0.0, np.zeros(cap)
    for _ in range(MC):
        visits[n - 1] += 1
        look, draft = threshold_rule(SHARP, tau, 0, keep_last=True)
        one = simulate_rule(SHARP, look, draft, c, n, V, 1, rng)
        tokens += one.expected_tokens[0]
        time += one.iteration_time[0]
        full = one.expected_tokens[0] == one.expected_drafts[0] + 1
        n = min(n + 2, cap) if full else max(1, n - 1)
    assert np.abs(visits / MC - got.stationary).max() < 0.02
    assert got.speedup == pytest.approx(tokens / time, rel=0.02)


def test_heuristic_schedule_without_threshold_accepts_fully_with_the_product_of_alphas() -> None:
    got = heuristic_schedule(FLAT, 0.0, None, cap=6)
    assert got.full_acceptance == pytest.approx(np.cumprod(FLAT.alphas(6)))


@pytest.mark.parametrize("law", [SHARP, FLAT], ids=["sharp", "flat"])
@pytest.mark.parametrize("c", [0.0, 0.1, 0.3])
def test_break_even_rule_is_the_ceiling_and_equals_its_monte_carlo(law, c) -> None:
    best = optimal_stopping(law, c, V, n_max=8)
    assert best.prediction.speedup[0] == pytest.approx(best.rate, rel=1e-6)
    fixed = max(threshold_prediction(law, [0.0], g, g, c, V).speedup[0] for g in range(1, 9))
    thresholds = max(threshold_prediction(law, EDGES[:-1], n_min, 8, c, V, keep).speedup.max()
                     for n_min in range(3) for keep in (False, True))
    assert best.rate >= max(fixed, thresholds) * (1 - 2e-3)
    look, draft = break_even_rule(law, V, c, best.rate, 8)
    sim = simulate_rule(law, look, draft, c, 8, V, MC, np.random.default_rng(3))
    assert sim.speedup[0] == pytest.approx(best.rate, rel=0.015)


def test_bad_laws_and_thresholds_are_refused() -> None:
    with pytest.raises(SpecdecError, match="edges"):
        ConfidenceLaw([0.0, 0.7, 0.5, 1.0], [[0.3, 0.3, 0.4]], [[0.5] * 3])
    with pytest.raises(SpecdecError, match="sum to 1"):
        ConfidenceLaw(EDGES, [[0.3] * 5], [[0.5] * 5])
    with pytest.raises(SpecdecError, match="acceptance"):
        ConfidenceLaw(EDGES, [[0.2] * 5], [[1.5] * 5])
    with pytest.raises(SpecdecError, match="bin edges"):
        threshold_prediction(SHARP, [0.33], 0, 4, 0.1)
    with pytest.raises(SpecdecError, match="n_min"):
        threshold_prediction(SHARP, [0.4], 5, 4, 0.1)


@pytest.mark.parametrize("keep_last", [False, True], ids=["drop", "keep"])
def test_plan_stopping_picks_the_best_threshold_on_its_grid(keep_last) -> None:
    from specdec.simulator.dynamic import plan_stopping

    plan = plan_stopping(SHARP, 0.1, V, max_n=8, keep_last=keep_last)
    grid = max(threshold_prediction(SHARP, EDGES[:-1], n_min, n_max, 0.1, V, keep_last).speedup.max()
               for n_min in range(4) for n_max in range(max(1, n_min), 9))
    assert plan.speedup == pytest.approx(grid)
    assert plan.speedup == pytest.approx(threshold_prediction(SHARP, [plan.tau], plan.n_min, plan.n_max, 0.1, V,
                                                              keep_last).speedup[0])
    assert plan.speedup >= plan.fixed_speedup * (1 - 1e-12) and plan.ceiling >= plan.speedup * (1 - 2e-3)
    flat = plan_stopping(FLAT, 0.1, V, max_n=8)  # a confidence that says little: a threshold gains little
    assert flat.gain < 0.03
