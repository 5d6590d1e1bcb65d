"""The validation's prediction models (docs/validation.md), as numpy functions.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target time ratio, v(k) the verify-cost curve, o(k) the decode loop's
own time per iteration with k drafts; all times in target steps. Pure numpy, no I/O.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from specdec.simulator.verify_cost import iteration_time


def survival_acceptance(accepted: Sequence[int], iterations: int) -> np.ndarray:
    """alpha'_i = accepted_i / accepted_{i-1} (accepted_0 = iterations), i = 1..gamma.

    accepted: [gamma] counts of iterations that accepted draft position i (1-based).
    Unlike the per-position acceptance over *reached* positions, the denominator counts every
    iteration that got that far, proposal or not, so 1 + sum_i prod_{j<=i} alpha'_j =
    1 + sum(accepted) / iterations, the measured tokens per iteration. Positions never
    reached get 0. Returns float64 [gamma].
    """
    accepted = np.asarray(accepted, dtype=np.float64)
    previous = np.concatenate([[float(iterations)], accepted[:-1]])
    return np.divide(accepted, previous, out=np.zeros_like(accepted), where=previous > 0)


def effective_cost(c: float, verify_cost: Sequence[float], overhead: Sequence[float]) -> tuple[float, np.ndarray]:
    """(c', v') with the loop overhead folded in: c' = c / (1 + o(0)),
    v'(k) = max(1, (v(k) + o(k - 1)) / (1 + o(0))), so v'(1) = 1 and a baseline token costs 1.

    The floor: no iteration over k tokens is cheaper than the baseline's step, so a measured
    value below 1 (timing noise on a tiny or very fast model) is read as 1, not as a speedup.

    verify_cost: v(1..K) [K]; overhead: o(0..K-1) [K], both in target steps."""
    o = np.asarray(overhead, dtype=np.float64)
    v = np.asarray(verify_cost, dtype=np.float64)
    base = 1.0 + o[0]
    return c / base, np.maximum((v + o) / base, 1.0)


def mean_iteration_time(k_hist: np.ndarray, c: float, verify_cost: np.ndarray) -> float:
    """Mean of k c + v(k + 1) over iterations, from a histogram of proposal lengths k_hist[k]."""
    ks = np.arange(k_hist.shape[0])
    times = iteration_time(ks, c, verify_cost)
    return float((k_hist * times).sum() / k_hist.sum())


def budgeted_speedup(alpha: float | Sequence[float], gamma: int, new_tokens: int, c: float, verify_cost: np.ndarray,
                     block_probs: np.ndarray | None = None) -> float:
    """Speedup of a run that emits exactly new_tokens tokens, draft acceptance i.i.d. alpha
    (or, given a sequence alpha_1, alpha_2, ..., the acceptance at draft position i given the
    drafts before it were accepted; positions beyond the sequence are never accepted).

    Dynamic programme over the tokens still to emit, n: an iteration drafts
    k = min(gamma, n - 1, b) tokens (the decoder never drafts past the budget; b is the
    drafter's proposal length, always >= gamma unless block_probs[b] gives its distribution,
    e.g. prompt lookup's teacher-forced one), accepts a of them with P(a) = alpha^a (1 - alpha)
    for a < k and alpha^k for a = k, emits a + 1 tokens and costs k c + v(k + 1) (in baseline
    token times, i.e. with the overheads folded in). Speedup = new_tokens / E(total time).
    For long runs and full blocks it tends to Eq. 1 / (gamma c + v(gamma + 1)).
    """
    per_position = np.clip(np.broadcast_to(np.asarray(alpha, dtype=np.float64), (gamma,)) if np.ndim(alpha) == 0
                           else np.pad(np.asarray(alpha, dtype=np.float64)[:gamma], (0, max(0, gamma - len(alpha)))),
                           0.0, 1.0)
    survival = np.concatenate([[1.0], np.cumprod(per_position)])  # S(0..gamma)
    reject = np.append(1.0 - per_position, 0.0)  # 1 - alpha_{a+1}, a = 0..gamma
    if block_probs is None:
        block_probs = np.zeros(gamma + 1)
        block_probs[gamma] = 1.0
    blocks = np.arange(block_probs.shape[0])
    time_left = np.zeros(new_tokens + 1)  # E(time to emit n more tokens), n = 0..new_tokens
    for n in range(1, new_tokens + 1):
        room = min(gamma, n - 1)
        k_probs = np.bincount(np.minimum(blocks, room), weights=block_probs, minlength=room + 1)
        total = 0.0
        for k, w in enumerate(k_probs):
            if w == 0.0:
                continue
            a = np.arange(k + 1)
            p_a = survival[a] * np.where(a < k, reject[a], 1.0)  # [k + 1]
            step = float(iteration_time(k, c, verify_cost))
            total += w * (step + float((p_a * time_left[n - a - 1]).sum()))
        time_left[n] = total
    return float(new_tokens / time_left[new_tokens])
