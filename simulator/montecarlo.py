"""Monte-Carlo simulation of Algorithm 1's accept/reject process, used to check the closed forms.

Names follow Leviathan et al.: `p` target, `q` draft, `alpha`, `gamma`, `lenience` (App. A.5).
i.i.d., per-position and explicit-distribution simulators, vectorised over iterations; all
randomness from the numpy Generator passed in. Details: docs/theory.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import (FloatArray, IntArray, check_alpha, check_distribution, check_gamma,
                                      check_lenience, check_n_iterations)
from specdec.simulator.positional import extend_per_position


@dataclass(frozen=True)
class SampledIterations:
    """Iterations of Algorithm 1 run on explicit distributions."""

    accepted: IntArray  # [n_iterations]: drafts accepted, 0..gamma
    tokens: IntArray  # [n_iterations, gamma + 1]: x_1..x_n then t at index n; -1 after that


def simulate_iid(alpha: npt.ArrayLike, gamma: int, n_iterations: int, rng: np.random.Generator) -> IntArray:
    """Accepted drafts per iteration when each draft is accepted with probability alpha, i.i.d.

    Args:
        alpha: acceptance rate(s), any shape S.
        gamma: draft tokens per iteration.
        n_iterations: iterations to simulate.
        rng: the source of randomness.

    Returns:
        Accepted counts in 0..gamma, shape [*S, n_iterations].
    """
    a = check_alpha(alpha)
    g, n = _scalar_gamma(gamma), check_n_iterations(n_iterations)
    r = rng.random(a.shape + (n, g))  # [*S, n_iterations, gamma]
    return _leading_accepts(r < a[..., None, None])


def simulate_per_position(alphas: npt.ArrayLike, gamma: int, n_iterations: int,
                          rng: np.random.Generator) -> IntArray:
    """Accepted drafts per iteration when draft i is accepted with probability alpha_i given 1..i-1 were.

    Args:
        alphas: per-position acceptances, shape [*S, K]; extended with alpha_K beyond K
            (as in simulator.positional).
        gamma, n_iterations, rng: as in simulate_iid.

    Returns:
        Accepted counts in 0..gamma, shape [*S, n_iterations].
    """
    g, n = _scalar_gamma(gamma), check_n_iterations(n_iterations)
    a = extend_per_position(alphas, g)  # [*S, gamma]
    r = rng.random(a.shape[:-1] + (n, g))  # [*S, n_iterations, gamma]
    return _leading_accepts(r < a[..., None, :])


def simulate_speculative_sampling(p: npt.ArrayLike, q: npt.ArrayLike, gamma: int, n_iterations: int,
                                  rng: np.random.Generator, lenience: float = 1.0) -> SampledIterations:
    """Run Algorithm 1's sampling and verification on explicit, context-free distributions.

    The target and draft distributions do not depend on the prefix (each position has its own
    fixed p_i, q_i), so draft i is accepted with probability acceptance_rate(p_i, q_i, l)
    independently of the others, and each output token at position i is distributed as p_i
    when l = 1 (Appendix A.1).

    Args:
        p: target distributions, shape [vocab] (same for every position) or [gamma + 1, vocab].
        q: draft distributions, shape [vocab] or [gamma, vocab].
        gamma: draft tokens per iteration.
        n_iterations: iterations to simulate.
        rng: the source of randomness.
        lenience: l in (0, 1] (Appendix A.5); l < 1 is not exact sampling from p.

    Returns:
        The accepted counts and output tokens of every iteration.
    """
    g, n = _scalar_gamma(gamma), check_n_iterations(n_iterations)
    p = _per_position(check_distribution(p, "p"), g + 1, "p", "gamma + 1")  # [gamma + 1, vocab]
    q = _per_position(check_distribution(q, "q"), g, "q", "gamma")  # [gamma, vocab]
    if g and p.shape[-1] != q.shape[-1]:
        raise SpecdecError(f"p and q must share the vocabulary axis, got {p.shape[-1]} and {q.shape[-1]}")
    l = check_lenience(lenience)

    u_draft = rng.random((n, g))
    drafts = np.empty((n, g), dtype=np.int64)  # [n_iterations, gamma]
    for i in range(g):  # positions; the iterations are vectorised
        drafts[:, i] = _sample(q[i], u_draft[:, i])
    positions = np.arange(g)[None, :]
    ratio = p[positions, drafts] / (l * q[positions, drafts])  # [n_iterations, gamma]; q > 0 where drawn
    accepted = _leading_accepts(rng.random((n, g)) < ratio)  # [n_iterations]

    # Last token: from norm(max(0, p_i - l q_i)) at the first rejection i, or p_(gamma+1).
    residual = np.maximum(0.0, p[:g] - l * q)  # [gamma, vocab]
    fallback = np.concatenate([residual, p[g:]], axis=0)  # [gamma + 1, vocab]
    u_last = rng.random(n)
    last = np.empty(n, dtype=np.int64)
    for k in range(g + 1):
        rows = accepted == k
        dist = fallback[k] if fallback[k].sum() > 0.0 else p[k]  # zero residual: rejection impossible
        last[rows] = _sample(dist, u_last[rows])

    tokens = np.concatenate([drafts, np.zeros((n, 1), dtype=np.int64)], axis=1)  # [n_iterations, gamma + 1]
    slot = np.arange(g + 1)[None, :]
    tokens = np.where(slot < accepted[:, None], tokens, -1)
    tokens[np.arange(n), accepted] = last
    return SampledIterations(accepted=accepted, tokens=tokens)


def _scalar_gamma(gamma: int) -> int:
    g = check_gamma(gamma)
    if g.ndim != 0:
        raise SpecdecError(f"gamma must be a single non-negative integer for a simulation, got shape {g.shape}")
    return int(g)


def _leading_accepts(accept: npt.NDArray[np.bool_]) -> IntArray:
    """Number of leading True values along the last axis (accepted drafts before the first rejection)."""
    return np.logical_and.accumulate(accept, axis=-1).sum(axis=-1).astype(np.int64)


def _per_position(dist: FloatArray, rows: int, name: str, rows_name: str) -> FloatArray:
    """A [vocab] distribution repeated for every position, or a checked [rows, vocab] table."""
    if dist.ndim == 1:
        return np.broadcast_to(dist, (rows, dist.shape[0]))
    if dist.ndim != 2 or dist.shape[0] != rows:
        raise SpecdecError(f"{name} must have shape [vocab] or [{rows_name}, vocab] = [{rows}, vocab], "
                           f"got {dist.shape}")
    return dist


def _sample(dist: FloatArray, u: FloatArray) -> IntArray:
    """Inverse-CDF sampling from dist [vocab] with uniforms u [m]; never returns a zero-probability token."""
    cdf = np.cumsum(dist)
    idx = np.searchsorted(cdf, u * cdf[-1], side="right")
    return np.minimum(idx, np.flatnonzero(dist > 0.0)[-1])
