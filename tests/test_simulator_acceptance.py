"""Acceptance from explicit distributions (Section 3.2) and lenience (Appendix A.5).

Names follow the paper: p target distribution, q draft distribution, lenience l.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.simulator import acceptance_rate, lk_divergence, speculative_output_distribution


@pytest.fixture
def pq() -> tuple[np.ndarray, np.ndarray]:
    """Eight random (p, q) pairs over a 12-token vocabulary, shape [8, 12], some with zeros."""
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.full(12, 0.5), size=8)
    q = rng.dirichlet(np.full(12, 0.5), size=8)
    p[0, :3] = 0.0
    q[1, 5:] = 0.0
    return p / p.sum(-1, keepdims=True), q / q.sum(-1, keepdims=True)


def test_alpha_is_one_minus_lk_divergence(pq: tuple[np.ndarray, np.ndarray]) -> None:
    p, q = pq
    alpha = acceptance_rate(p, q)
    assert alpha.shape == (8,)
    assert np.allclose(alpha, np.minimum(p, q).sum(-1), rtol=1e-12)  # Theorem 5
    assert np.allclose(alpha, 1.0 - lk_divergence(p, q), rtol=1e-12)  # Lemma 3
    assert np.allclose(lk_divergence(p, q), 0.5 * np.abs(p - q).sum(-1), rtol=1e-12)
    assert np.allclose(lk_divergence(p, q), lk_divergence(q, p))  # symmetric (Corollary 4)
    assert np.allclose(lk_divergence(p, p), 0.0)
    assert lk_divergence([1.0, 0.0], [0.0, 1.0]) == 1.0  # disjoint support


def test_alpha_is_the_expected_acceptance_probability(pq: tuple[np.ndarray, np.ndarray]) -> None:
    # beta = E_{x~q} min(1, p(x)/q(x)) (proof of Theorem 5), with lenience E_{x~q} p / max(p, l q) (A.5).
    p, q = pq
    for l in (1.0, 0.5, 0.1):
        with np.errstate(divide="ignore", invalid="ignore"):
            accept = np.where(q > 0, p / np.maximum(p, l * q), 0.0)
        assert np.allclose(acceptance_rate(p, q, l), (q * accept).sum(-1), rtol=1e-12)


def test_lenience_raises_alpha_and_bounds_output(pq: tuple[np.ndarray, np.ndarray]) -> None:
    p, q = pq
    alphas = [acceptance_rate(p, q, l) for l in (1.0, 0.5, 0.3, 0.1)]
    for lower, higher in zip(alphas, alphas[1:]):
        assert np.all(higher >= lower - 1e-15)
    assert np.allclose(speculative_output_distribution(p, q), p, atol=1e-12)  # l = 1: exact (Appendix A.1)
    for l in (0.5, 0.3, 0.1):
        out = speculative_output_distribution(p, q, l)
        assert np.allclose(out.sum(-1), 1.0)
        assert np.all(out <= p / l + 1e-12)  # "no token ... greater than p(x)/l" (Appendix A.5)
        assert not np.allclose(out, p)  # lenience is not exact sampling
