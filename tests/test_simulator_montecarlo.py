"""Every closed form checked against Monte-Carlo runs of Algorithm 1's accept/reject process.

Names follow Leviathan et al. (2023): p target, q draft distribution, alpha, gamma, c, c_hat.

Statistical test used throughout: N = 200,000 simulated iterations from a fixed seed; an
estimate must lie within 5 standard errors of the closed form, the standard error being
estimated from the same sample (binomial for acceptance rates, delta method for ratios).
For a correct formula a 5-sigma miss has probability about 6e-7 per check, and the fixed
seed makes every run repeat exactly. Distribution checks use Pearson's chi-square
goodness-of-fit test at significance 1e-4.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specdec.simulator import (accepted_histogram, acceptance_rate, expected_tokens, mean_tokens,
                       mean_tokens_standard_error, memory_access_reduction, operation_increase,
                       operation_increase_from_counts, oracle_expected_tokens, oracle_walltime_improvement,
                       per_position_acceptance, positional_expected_tokens, positional_walltime_improvement,
                       simulate_iid, simulate_per_position, simulate_speculative_sampling,
                       speculative_output_distribution, walltime_improvement, walltime_improvement_from_counts)

N = 200_000
SIGMAS = 5.0
CHI2_LEVEL = 1e-4
ALPHAS = np.array([0.0, 0.3, 0.62, 0.8, 0.95])


def assert_within(estimate: np.ndarray, expected: np.ndarray, standard_error: np.ndarray) -> None:
    """|estimate - expected| <= SIGMAS * standard error (plus float slack for zero-variance cases)."""
    estimate, expected, standard_error = np.broadcast_arrays(estimate, expected, standard_error)
    assert np.all(np.abs(estimate - expected) <= SIGMAS * standard_error + 1e-12), (estimate, expected)


def binomial_se(rate: np.ndarray, trials: np.ndarray) -> np.ndarray:
    return np.sqrt(rate * (1.0 - rate) / trials)


@pytest.mark.parametrize("gamma", [1, 3, 7])
def test_iid_closed_forms(gamma: int) -> None:
    rng = np.random.default_rng(1000 + gamma)
    hist = accepted_histogram(simulate_iid(ALPHAS, gamma, N, rng), gamma)  # [5, gamma + 1]
    tokens, se = mean_tokens(hist), mean_tokens_standard_error(hist)
    assert_within(tokens, expected_tokens(ALPHAS, gamma), se)  # Eq. 1
    assert_within(tokens, memory_access_reduction(ALPHAS, gamma), se)  # Section 3.4
    for c in (0.0, 0.05, 0.3):
        time = gamma * c + 1.0
        assert_within(walltime_improvement_from_counts(hist, c), walltime_improvement(ALPHAS, gamma, c),
                      se / time)  # Theorem 8 (Corollary 9 at gamma = 1)
        ops = operation_increase_from_counts(hist, c)
        assert_within(ops, operation_increase(ALPHAS, gamma, c), ops * se / tokens)  # Theorem 10
    # Under the i.i.d. assumption every position accepts with probability alpha (alpha = 0
    # never reaches position 2, so it is left out).
    reached = np.cumsum(hist[1:, ::-1], axis=-1)[..., ::-1][..., :-1]  # [4, gamma]
    assert_within(per_position_acceptance(hist[1:]), ALPHAS[1:, None], binomial_se(ALPHAS[1:, None], reached))


def test_oracle_bound() -> None:
    # The oracle drafts exactly the accepted tokens: K ~ geometric, tokens K + 1, time c K + 1.
    # gamma = 40 at alpha = 0.6 caps K with probability 0.6^40 ~ 1e-9, i.e. never in N draws.
    alpha, c = 0.6, 0.05
    accepted = simulate_iid(alpha, 40, N, np.random.default_rng(7))
    assert accepted.max() < 40
    tokens, time = accepted + 1.0, c * accepted + 1.0
    assert_within(tokens.mean(), oracle_expected_tokens(alpha), tokens.std(ddof=1) / np.sqrt(N))
    ratio = tokens.mean() / time.mean()  # a ratio estimator; delta-method standard error below
    ratio_se = np.std(tokens - ratio * time, ddof=1) / (np.sqrt(N) * time.mean())
    assert_within(ratio, oracle_walltime_improvement(alpha, c), ratio_se)


def test_per_position_closed_forms() -> None:
    alphas = np.array([0.95, 0.85, 0.7, 0.6])
    gamma = 6  # beyond K = 4 the last value 0.6 is reused
    hist = accepted_histogram(simulate_per_position(alphas, gamma, N, np.random.default_rng(11)), gamma)
    tokens, se = mean_tokens(hist), mean_tokens_standard_error(hist)
    assert_within(tokens, positional_expected_tokens(alphas, gamma), se)
    verify_cost = np.array([1.0, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8])
    time = gamma * 0.02 + verify_cost[gamma]
    assert_within(walltime_improvement_from_counts(hist, 0.02, verify_cost),
                  positional_walltime_improvement(alphas, gamma, 0.02, verify_cost), se / time)
    reached = np.cumsum(hist[::-1])[::-1][:-1]
    extended = np.array([0.95, 0.85, 0.7, 0.6, 0.6, 0.6])
    assert_within(per_position_acceptance(hist), extended, binomial_se(extended, reached))


def chi2_pvalue(tokens: np.ndarray, dist: np.ndarray) -> float:
    """Pearson chi-square p-value of sampled tokens against dist, over tokens with dist > 0."""
    counts = np.bincount(tokens, minlength=dist.size)
    assert counts[dist == 0].sum() == 0, "sampled a token of probability 0"
    support = dist > 0
    return float(stats.chisquare(counts[support], dist[support] * tokens.size).pvalue)


def test_speculative_sampling_on_explicit_distributions() -> None:
    """The real rule on per-position p_i, q_i: acceptances are sum min(p_i, q_i), outputs follow p_i."""
    gamma, vocab = 4, 8
    dists = np.random.default_rng(3)
    p = dists.dirichlet(np.ones(vocab), size=gamma + 1)  # [gamma + 1, vocab]
    q = dists.dirichlet(np.ones(vocab), size=gamma)  # [gamma, vocab]
    p[0, 2] = 0.0  # a token the target never emits but the draft proposes
    p[0] /= p[0].sum()
    run = simulate_speculative_sampling(p, q, gamma, N, np.random.default_rng(4))
    hist = accepted_histogram(run.accepted, gamma)

    alpha_i = acceptance_rate(p[:gamma], q)  # Theorem 5, per position
    reached = np.cumsum(hist[::-1])[::-1][:-1]
    assert_within(per_position_acceptance(hist), alpha_i, binomial_se(alpha_i, reached))
    assert_within(mean_tokens(hist), positional_expected_tokens(alpha_i, gamma), mean_tokens_standard_error(hist))
    # Appendix A.1: the token at output position i, when there is one, is distributed as p_i.
    for i in range(gamma + 1):
        emitted = run.tokens[:, i][run.tokens[:, i] >= 0]
        assert emitted.size == (run.accepted >= i).sum()
        assert chi2_pvalue(emitted, p[i]) > CHI2_LEVEL


def test_speculative_sampling_with_lenience() -> None:
    """Appendix A.5: alpha = sum min(p/l, q); outputs follow speculative_output_distribution, not p."""
    gamma, lenience = 3, 0.3
    dists = np.random.default_rng(8)
    p, q = dists.dirichlet(np.ones(10)), dists.dirichlet(np.ones(10))  # same for every position
    run = simulate_speculative_sampling(p, q, gamma, N, np.random.default_rng(9), lenience=lenience)
    hist = accepted_histogram(run.accepted, gamma)
    alpha = acceptance_rate(p, q, lenience)
    assert alpha > acceptance_rate(p, q)
    assert_within(mean_tokens(hist), expected_tokens(alpha, gamma), mean_tokens_standard_error(hist))
    first = run.tokens[:, 0]
    assert chi2_pvalue(first, speculative_output_distribution(p, q, lenience)) > CHI2_LEVEL
    assert chi2_pvalue(first, p) < 1e-6  # the test can tell: lenience is not exact sampling


def test_seeded_runs_repeat_and_gamma0_draws_nothing() -> None:
    a = simulate_per_position([0.9, 0.5], 5, 1000, np.random.default_rng(42))
    b = simulate_per_position([0.9, 0.5], 5, 1000, np.random.default_rng(42))
    assert np.array_equal(a, b)
    p = np.array([0.5, 0.3, 0.2])
    runs = [simulate_speculative_sampling(p, p[::-1], 2, 1000, np.random.default_rng(42)) for _ in range(2)]
    assert np.array_equal(runs[0].tokens, runs[1].tokens)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert np.array_equal(simulate_iid(0.5, 0, 100, rng), np.zeros(100))
    assert rng.bit_generator.state == state
