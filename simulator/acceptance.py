"""Acceptance rate from explicit distributions (Section 3.2) and with lenience (Appendix A.5).

Names follow Leviathan et al. (ICML 2023): `p` is the target distribution, `q` the draft's,
`alpha` (beta for one prefix) the acceptance rate, `lenience` the factor l of Appendix A.5.

Distributions lie along the last axis (the vocabulary); leading axes broadcast, e.g.
p, q of shape [n_prefixes, vocab] give one beta per prefix, and their mean is alpha
(Corollary 6).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from specdec.simulator.checks import FloatArray, check_distribution, check_lenience


def lk_divergence(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """D_LK(p, q) = sum_x |p(x) - M(x)| with M = (p + q)/2 (Definition 2), in [0, 1]."""
    p = check_distribution(p, "p")
    q = check_distribution(q, "q")
    return np.abs(p - (p + q) / 2.0).sum(axis=-1)


def acceptance_rate(p: npt.ArrayLike, q: npt.ArrayLike, lenience: float = 1.0) -> FloatArray:
    """Probability that speculative sampling accepts a draft x ~ q: sum_x min(p(x)/l, q(x)).

    With l = 1 (exact speculative sampling) this is Theorem 5, beta = sum_x min(p, q) =
    1 - D_LK(p, q). With lenience l < 1 (Appendix A.5) a draft is accepted with probability
    min(1, p(x)/(l q(x))); this raises alpha but is NOT exact sampling from p: a token's
    output probability is only bounded by p(x)/l (see speculative_output_distribution).
    """
    p = check_distribution(p, "p")
    q = check_distribution(q, "q")
    return np.minimum(p / check_lenience(lenience), q).sum(axis=-1)


def speculative_output_distribution(p: npt.ArrayLike, q: npt.ArrayLike, lenience: float = 1.0) -> FloatArray:
    """Exact distribution of the token that one step of speculative sampling outputs, shape [..., vocab].

    P(x) = min(q(x), p(x)/l) + (1 - beta) p'(x), where beta = acceptance_rate(p, q, l) and the
    fallback p' = norm(max(0, p - l q)) is Algorithm 1's adjusted distribution with q
    scaled by l. For l = 1 this equals p (Appendix A.1); for l < 1 it is at most p(x)/l.
    """
    p = check_distribution(p, "p")
    q = check_distribution(q, "q")
    l = check_lenience(lenience)
    accepted = np.minimum(q, p / l)  # P(draft x and accept it)
    residual = np.maximum(0.0, p - l * q)
    residual_mass = residual.sum(axis=-1, keepdims=True)
    reject = 1.0 - accepted.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        fallback = np.where(residual_mass > 0.0, residual / residual_mass, 0.0)
    return accepted + np.clip(reject, 0.0, None) * fallback
