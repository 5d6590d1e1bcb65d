"""A ragged batch: B rows verified in one pass, each proposing and accepting its own count.

Each slot-iteration proposes K drafts and accepts N of them with the joint distribution
pi(k, n) (measured: `BatchResult.joint`; or from per-position acceptances with K = gamma:
`joint_from_alphas`). Rows are independent. A pass feeds every row its pending token and its
drafts, padded to the longest row, so it costs t(B, M + 1) with M = max of the B rows' K, and
every row's drafting and verdict add o seconds, and a draft model that drafts every row in one
forward adds d(B) seconds a pass (its batched forwards, not B times one row's, the first feeding
what the verdicts committed: `draft_pass_seconds`; o is then the rest, the verdicts):

    P(M <= m)       = F(m)^B,  F the distribution function of K,
    E[iteration]    = sum_m P(M = m) t(B, m + 1) + B o + d(B),
    throughput(B)   = B E[N + 1] / E[iteration]                      tokens/s (renewal-reward),
    speedup(B)      = throughput(B) / (B / (t(B, 1) + B o_0))         against plain batched decoding.

Per-token latency: a row that emits N + 1 tokens in a pass of s seconds gives each of them
s / (N + 1); over tokens, the row's own (K, N) weighted by N + 1, and the pass's M the larger
of its K and the other B - 1 rows' maximum, so the p50/p99 come from that discrete law
(`latency_quantiles`). With a fixed proposal length and o = gamma c t(B, 1) / B this is the
lockstep plan of `specdec.simulator.batch`. Packed instead of padded (`packed=True`: an engine
that runs every row's tokens end to end in one batch, as llama.cpp's server does), a pass costs
t(B, 1 + S / B) with S = the sum of the B rows' K (its law the B-fold convolution of K's), t
read linearly between the integer k: B rows of 1 + S / B tokens each are the same S + B tokens. Checked against `simulate_ragged` (Monte Carlo) in
the tests and against the ragged decoder's measurements by `specdec serve-bench`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import check_per_position


@dataclass(frozen=True)
class RaggedPrediction:
    """One batch size: expected pass seconds, tokens/s over the batch, speedup over plain
    batched decoding, and the token-weighted per-token latency law (values, weights)."""

    batch: int
    iteration_seconds: float
    throughput: float
    speedup: float
    latency_values: np.ndarray
    latency_weights: np.ndarray

    def latency_quantile(self, q: float) -> float:
        return weighted_quantile(self.latency_values, self.latency_weights, q)


def check_joint(joint: npt.ArrayLike) -> np.ndarray:
    """pi(k, n) [K + 1, K + 1] from counts or probabilities: nonnegative, finite, n <= k only."""
    p = np.asarray(joint, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.size == 0:
        raise SpecdecError(f"the (proposed, accepted) table must be square, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.sum() <= 0:
        raise SpecdecError("the (proposed, accepted) table must be nonnegative, finite and not all zero")
    if np.any(np.triu(p, 1) > 0):
        raise SpecdecError("a row cannot accept more drafts than it proposed (entries above the diagonal)")
    return p / p.sum()


def joint_from_alphas(alphas: npt.ArrayLike, gamma: int) -> np.ndarray:
    """pi(k, n) of a drafter that always proposes gamma tokens accepted with per-position rates
    alpha_1..alpha_K (gamma > K reuses alpha_K): P(N >= i) = alpha_1 ... alpha_i."""
    a = check_per_position(alphas)
    if gamma < 0:
        raise SpecdecError(f"gamma must be >= 0, got {gamma}")
    a = np.concatenate([a, np.repeat(a[-1:], max(0, gamma - a.size))])[:gamma]
    reach = np.concatenate([[1.0], np.cumprod(a)])  # P(N >= n), n = 0..gamma
    out = np.zeros((gamma + 1, gamma + 1))
    out[gamma] = reach - np.append(reach[1:], 0.0)
    return out


def predict_ragged(joint: npt.ArrayLike, batch: int, seconds: npt.ArrayLike, overhead: float,
                   base_overhead: float = 0.0, packed: bool = False, draft_seconds: float = 0.0) -> RaggedPrediction:
    """The module doc's prediction at batch size `batch`.

    seconds: t(batch, k) for k = 1..K' (K' >= the largest proposal + 1); overhead: o, seconds of
    drafting and verdicts per row per pass; base_overhead: o_0, the same for plain decoding;
    packed: rows end to end, not padded to the longest (module doc); draft_seconds: d(B), a
    batched draft model's seconds per pass for all the rows (0: drafting is in o)."""
    p = check_joint(joint)
    t = np.asarray(seconds, dtype=np.float64)
    if batch < 1:
        raise SpecdecError(f"batch size must be >= 1, got {batch}")
    if t.ndim != 1 or t.size < p.shape[0] or not np.all(np.isfinite(t)) or t.min() <= 0:
        raise SpecdecError(f"t(B, k) must be positive for k = 1..{p.shape[0]} (proposals up to {p.shape[0] - 1})")
    if not all(np.isfinite(x) and x >= 0 for x in (overhead, base_overhead, draft_seconds)):
        raise SpecdecError("the per-row overheads and the draft's seconds must be finite seconds >= 0")
    pk = p.sum(axis=1)  # P(K = k)
    if packed:
        return _predict_packed(p, pk, batch, t, overhead, base_overhead, draft_seconds)
    cdf = np.cumsum(pk)
    p_max = _longest_law(pk, batch)  # P(M = m)
    pass_seconds = t[:p.shape[0]]  # t(B, m + 1), m = 0..K
    iteration = float(p_max @ pass_seconds) + batch * overhead + draft_seconds
    tokens = float(p.sum(axis=0) @ (np.arange(p.shape[0]) + 1))  # E[N + 1]
    throughput = batch * tokens / iteration
    base = batch / (t[0] + batch * base_overhead)
    # latency law: own (k, n), others' max m' (B - 1 rows); the pass's M = max(k, m')
    others = np.diff(np.concatenate([[0.0], cdf ** (batch - 1)])) if batch > 1 else np.eye(1, p.shape[0])[0]
    k_idx, n_idx, m_idx = np.meshgrid(*(np.arange(p.shape[0]),) * 3, indexing="ij")
    weight = p[:, :, None] * others[None, None, :] * (n_idx + 1) / tokens
    value = (pass_seconds[np.maximum(k_idx, m_idx)] + batch * overhead + draft_seconds) / (n_idx + 1)
    keep = weight > 0
    return RaggedPrediction(batch, iteration, throughput, throughput / base, value[keep], weight[keep])


def _packed_seconds(t: np.ndarray, batch: int, drafted: np.ndarray) -> np.ndarray:
    """t(B, 1 + S / B) for total drafts S = `drafted` (array), linear between the integer k."""
    return np.interp(1 + drafted / batch, np.arange(1, t.size + 1), t)


def _predict_packed(p: np.ndarray, pk: np.ndarray, batch: int, t: np.ndarray, overhead: float,
                    base_overhead: float, draft_seconds: float) -> RaggedPrediction:
    """predict_ragged with the pass priced at the rows' summed drafts (module doc)."""
    others = np.ones(1)  # law of the other B - 1 rows' summed K
    for _ in range(batch - 1):
        others = np.convolve(others, pk)
    p_sum = np.convolve(others, pk)  # law of S over the B rows
    iteration = float(p_sum @ _packed_seconds(t, batch, np.arange(p_sum.size))) + batch * overhead + draft_seconds
    tokens = float(p.sum(axis=0) @ (np.arange(p.shape[0]) + 1))
    throughput = batch * tokens / iteration
    base = batch / (t[0] + batch * base_overhead)
    k_idx, n_idx, s_idx = np.meshgrid(np.arange(p.shape[0]), np.arange(p.shape[0]), np.arange(others.size),
                                      indexing="ij")
    weight = p[:, :, None] * others[None, None, :] * (n_idx + 1) / tokens
    value = (_packed_seconds(t, batch, k_idx + s_idx) + batch * overhead + draft_seconds) / (n_idx + 1)
    keep = weight > 0
    return RaggedPrediction(batch, iteration, throughput, throughput / base, value[keep], weight[keep])


def draft_pass_seconds(joint: npt.ArrayLike, batch: int, draft_seconds: npt.ArrayLike, packed: bool = False) -> float:
    """d(B): a batched draft model's seconds per pass. It runs M forwards, M the longest of the B
    rows' proposals (a row drafts K tokens, one a forward; none when no row drafts), and its first
    forward feeds every drafting row what its last verdict committed past the draft's cache: one
    token, or two when that verdict accepted the row's whole draft (the last drafted token is
    appended, never fed). Passes independent, rows independent; with f = P(N = K > 0) and a =
    P(K > 0) under pi(k, n), P(M <= m) = F(m)^B and t_d(B, k) = draft_seconds[k - 1]:

        d(B)  = sum_{m >= 1} P(M = m) (m - 1) t_d(B, 1) + first,
        first = P(M >= 1) t_d(B, 1) + (1 - (1 - f a)^B) (t_d(B, 2) - t_d(B, 1))   padded (widest row),
              = P(M >= 1) t_d(B, 1 + f)                                          packed (mean width).

    At B = 1 the second token is nearly free on a one-row pass; at B = 16 the two-token forward
    runs twice the rows, which on a CPU can cost several one-token forwards (docs/batching.md)."""
    p = check_joint(joint)
    t = np.asarray(draft_seconds, dtype=np.float64)
    if t.ndim != 1 or t.size < 2 or not np.all(np.isfinite(t)) or t.min() <= 0:
        raise SpecdecError("the draft's t_d(B, k) must be positive seconds for k = 1, 2")
    if batch < 1:
        raise SpecdecError(f"batch size must be >= 1, got {batch}")
    p = p / p.sum()
    full, drafts = float(np.trace(p[1:, 1:])), float(p[1:].sum())  # f = P(N = K > 0), a = P(K > 0)
    some = 1.0 - _longest_law(p.sum(axis=1), batch)[0]  # P(M >= 1)
    first = some * float(np.interp(1 + full, (1, 2), t[:2])) if packed else \
        some * t[0] + (1 - (1 - full * drafts) ** batch) * (t[1] - t[0])
    return (longest_proposal(p, batch) - some) * float(t[0]) + first  # sum_m P(M = m) (m - 1)_+ = E[M] - P(M >= 1)


def longest_proposal(joint: npt.ArrayLike, batch: int) -> float:
    """E[M], M the longest of B independent rows' proposals under pi(k, n): the forwards a batched
    draft model runs a pass (`draft_pass_seconds`)."""
    p = check_joint(joint)
    p_max = _longest_law(p.sum(axis=1) / p.sum(), batch)
    return float(p_max @ np.arange(p_max.size))


def _longest_law(pk: np.ndarray, batch: int) -> np.ndarray:
    """P(M = m), M the largest of `batch` independent draws of K ~ pk: F(m)^B differenced."""
    return np.diff(np.concatenate([[0.0], np.cumsum(pk) ** batch]))


def crossover(sizes: Sequence[int], speedups: Sequence[float]) -> int | None:
    """Where speculation stops paying: the smallest batch size from which on every speedup is
    below 1 (the first size when it never pays); None when the largest size still pays."""
    return next((b for i, b in enumerate(sizes) if all(s < 1.0 for s in speedups[i:])), None)


def crossover_range(sizes: Sequence[int], intervals: Sequence[Sequence[float]]) -> tuple[int | None, int | None]:
    """Where the measured crossover can lie given each speedup's interval (low, high): from the
    crossover of the lows (the earliest the data allow) to that of the highs (the latest; None:
    past the largest size). Equal ends: the measurement decides the crossover; a predicted
    crossover outside the range is contradicted by it."""
    return (crossover(sizes, [low for low, _ in intervals]), crossover(sizes, [high for _, high in intervals]))


def weighted_quantile(values: npt.ArrayLike, weights: npt.ArrayLike, q: float) -> float:
    """The q-quantile (0 < q < 1) of a discrete law or a weighted sample: the smallest value whose
    cumulative weight reaches q."""
    v, w = np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    if v.size == 0 or v.shape != w.shape or not 0 < q < 1:
        raise SpecdecError("a quantile needs values with matching weights and 0 < q < 1")
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order]) / w.sum()
    return float(v[order][min(int(np.searchsorted(cum, q - 1e-12)), v.size - 1)])


def simulate_ragged(joint: npt.ArrayLike, batch: int, seconds: npt.ArrayLike, overhead: float, passes: int,
                    rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray]:
    """Monte Carlo of `passes` passes: each row draws its (K, N) from pi independently.
    Returns (throughput, per-token latencies, their token counts) as the decoder records them."""
    p = check_joint(joint)
    t = np.asarray(seconds, dtype=np.float64)
    flat = rng.choice(p.size, size=(passes, batch), p=p.reshape(-1))
    k, n = np.divmod(flat, p.shape[1])
    pass_seconds = t[k.max(axis=1)] + batch * overhead  # [passes]
    tokens = n + 1
    throughput = float(tokens.sum() / pass_seconds.sum())
    return throughput, (pass_seconds[:, None] / tokens).reshape(-1), tokens.reshape(-1)
