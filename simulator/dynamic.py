"""Dynamic draft length (issue 52): the speedup of the stopping rules engines run instead of a
fixed gamma, from the joint law of the draft's confidence and acceptance per draft position.

- `threshold_prediction`: stop drafting when the draft's top probability falls below tau, after
  at least n_min and at most n_max tokens (llama.cpp's --spec-draft-p-min / -n-max and BiLD's
  fallback drop the token that fell below; transformers' assistant_confidence_threshold keeps it:
  `keep_last`). n_min here always drafts the first n_min positions (the decoder's
  `ConfidenceThreshold`); llama.cpp's --spec-draft-n-min instead discards drafts shorter than it,
  which this model with n_min = 0 does not price.
- `heuristic_schedule`: transformers' "heuristic" num_assistant_tokens schedule (+2 after a fully
  accepted draft, -1 otherwise, at least 1) as a Markov chain over the draft length: its
  stationary law and long-run speedup, with or without a confidence threshold.
- `optimal_stopping`: the break-even rule, the ceiling the others are measured against: draft the
  next token when the chance that it is accepted with all before it, rho * a(b), pays for its
  verify cost at the best rate lambda achievable (one-step look-ahead, lambda found by
  Dinkelbach's iteration); evaluated on a grid of rho.
- `simulator.dynamic_monte_carlo`: a Monte Carlo of any of them (the tests check each closed
  form against it).

Names follow Leviathan et al. (`alpha`, `c`, v(k) the verify cost of k tokens in target steps,
v(1) = 1). Model: a draft is on track while every token before it was accepted. At draft
position i on track the draft's confidence falls in bin b with probability w_i(b) and the token
is then accepted with probability a_i(b) (for greedy decoding: the draft's token is the
target's; at T > 0: E min(1, p/q)), the rows conditioned on the accepted prefix (one row: the
same law at every position); past a rejected token the draft's confidence follows `off` (row 1
when not given), which only decides whether it goes on drafting. Positions past the law's last
row reuse it. An iteration's time is c per draft forward plus v(L + 1) for the verify pass over
L drafts; the speedup is the long-run tokens per unit time (renewal-reward: E tokens / E time)
against one target step per token. Derivations: docs/theory.md, "Dynamic draft length". Pure numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import FloatArray


@dataclass(frozen=True)
class ConfidenceLaw:
    """P(confidence bin b) and P(accepted | b) per draft position on track (rows past the last
    reuse it), and the confidence law of a draft past a rejected token (`off`, default row 1)."""

    edges: FloatArray  # [M + 1] bin edges of the draft's top probability, 0 = e_0 < ... < e_M = 1
    weights: FloatArray  # [K, M] w_i(b); each row sums to 1
    accept: FloatArray  # [K, M] a_i(b) in [0, 1]
    off: FloatArray | None = None  # [M] bin weights past a rejected draft; None: weights[0]

    def __post_init__(self) -> None:
        e, w, a = (np.asarray(x, dtype=np.float64) for x in (self.edges, self.weights, self.accept))
        if e.ndim != 1 or e.size < 2 or e[0] != 0 or e[-1] != 1 or np.any(np.diff(e) <= 0):
            raise SpecdecError("confidence bin edges must rise strictly from 0 to 1")
        if w.ndim != 2 or w.shape != a.shape or w.shape[1] != e.size - 1 or w.shape[0] < 1:
            raise SpecdecError(f"weights and accept must both be [positions, {e.size - 1} bins], got {w.shape}, "
                               f"{a.shape}")
        off = w[0] if self.off is None else np.asarray(self.off, dtype=np.float64)
        rows = np.vstack([w, off[None, :]]) if off.shape == (w.shape[1],) else None
        if rows is None or not (np.all(np.isfinite(rows)) and np.all(rows >= 0)
                                and np.allclose(rows.sum(axis=1), 1.0, atol=1e-9)):
            raise SpecdecError("each position's bin weights (and the off-track law's) must be >= 0 and sum to 1")
        if not (np.all(np.isfinite(a)) and np.all((a >= 0) & (a <= 1))):
            raise SpecdecError("acceptance per bin must lie in [0, 1]")
        object.__setattr__(self, "edges", e)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "accept", a)
        object.__setattr__(self, "off", off)

    @classmethod
    def from_counts(cls, edges: npt.ArrayLike, positions: npt.ArrayLike, accepted: npt.ArrayLike,
                    min_count: float = 20.0, off: npt.ArrayLike | None = None) -> "ConfidenceLaw":
        """The law from counts per (position, bin) ([K, M], or [M] for one row): positions (or
        their weights), and the summed acceptance there. Row 1 is kept whenever it counts
        anything; the rows from the first one counting fewer than `min_count` on are dropped
        (the last kept row stands for them). An empty bin: acceptance 0 (it is never drawn).
        `off`: the counts (weights) per bin past a rejected draft (None or all 0: row 1's law)."""
        n = np.atleast_2d(np.asarray(positions, dtype=np.float64))
        s = np.atleast_2d(np.asarray(accepted, dtype=np.float64))
        if n.shape != s.shape or n.ndim != 2 or n[0].sum() <= 0:
            raise SpecdecError(f"confidence counts must be [positions, bins] alike and count row 1, got {n.shape}, "
                               f"{s.shape}")
        short = np.flatnonzero(n.sum(axis=1) < min_count)
        k = max(1, int(short[0]) if short.size else n.shape[0])
        n, s = n[:k], s[:k]
        accept = np.divide(s, n, out=np.zeros_like(n), where=n > 0)
        o = None if off is None else np.asarray(off, dtype=np.float64)
        if o is not None and (o.shape != (n.shape[1],) or np.any(o < 0) or not np.all(np.isfinite(o))):
            raise SpecdecError(f"the past-rejection counts must be {n.shape[1]} bins, finite and >= 0")
        o = o / o.sum() if o is not None and o.sum() > 0 else None
        return cls(edges, n / n.sum(axis=1, keepdims=True), np.clip(accept, 0.0, 1.0), o)

    def rows(self, n: int) -> tuple[FloatArray, FloatArray]:
        """(w, a), each [n, M], for positions 1..n."""
        idx = np.minimum(np.arange(n), self.weights.shape[0] - 1)
        return self.weights[idx], self.accept[idx]

    def alphas(self, n: int) -> FloatArray:
        """alpha_i = sum_b w_i(b) a_i(b), i = 1..n: the acceptance a fixed gamma sees."""
        w, a = self.rows(n)
        return (w * a).sum(axis=1)

    def above(self, taus: npt.ArrayLike) -> np.ndarray:
        """[T, M] bool: bin b lies at or above tau (tau must be a bin edge)."""
        t = np.atleast_1d(np.asarray(taus, dtype=np.float64))
        hits = np.isclose(t[:, None], self.edges[None, :], rtol=0, atol=1e-12)
        if not hits.any(axis=1).all():
            raise SpecdecError(f"thresholds must be bin edges of the law ({np.round(self.edges, 4).tolist()})")
        return self.edges[None, :-1] >= t[:, None] - 1e-12


def confidence_law(d: dict | None, min_count: float = 20.0) -> ConfidenceLaw | None:
    """The law an estimate's "confidence_law" entry holds (the counts of
    `specdec.reference.estimate.confidence`): per draft position where it has "per_position" (rows
    counting fewer than min_count dropped), else the pooled row; past a rejection its
    "past_rejection" counts where they count at least min_count (older files: row 1). None when
    the entry is missing or counts nothing."""
    if not d or sum(d.get("positions", ())) == 0:
        return None
    rows, off = d.get("per_position"), (d.get("past_rejection") or {}).get("positions")
    off = off if off is not None and sum(off) >= min_count else None
    if rows:
        return ConfidenceLaw.from_counts(d["edges"], rows["positions"], rows["accepted"], min_count, off)
    return ConfidenceLaw.from_counts(d["edges"], d["positions"], d["accepted"], 0.0, off)


@dataclass(frozen=True)
class RulePrediction:
    """Per rule (arrays over the rules evaluated): E tokens, E draft tokens and forwards, E time
    (target steps) and speedup per iteration; the threshold rule also the law of the draft
    length, P(L = 0..n_max) [T, n_max + 1] (an engine's own costs price it: its verify of 1 + L
    tokens is not linear in L)."""

    expected_tokens: FloatArray
    expected_drafts: FloatArray
    expected_forwards: FloatArray
    iteration_time: FloatArray
    speedup: FloatArray
    length_law: FloatArray | None = None


def verify_curve(verify_cost: npt.ArrayLike | None, top: int) -> FloatArray:
    """v(1..top + 1) (1 when not given; the last value past a shorter curve)."""
    if verify_cost is None:
        return np.ones(top + 1)
    v = np.asarray(verify_cost, dtype=np.float64)
    if v.ndim != 1 or v.size < 1 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise SpecdecError("the verify cost v(1..K) must be positive and finite")
    return np.concatenate([v, np.full(max(0, top + 1 - v.size), v[-1])])[:top + 1]


def draft_curve(c: float | npt.ArrayLike, top: int) -> FloatArray:
    """c_1..c_top: the draft cost per forward of an iteration that makes k forwards (a scalar: the
    same for every k; a shorter curve: its last value past its end)."""
    x = np.atleast_1d(np.asarray(c, dtype=np.float64))
    if x.ndim != 1 or x.size < 1 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise SpecdecError(f"c must be finite and >= 0 (a number, or one per forward count), got {c}")
    return np.concatenate([x, np.full(max(0, top - x.size), x[-1])])[:top]


def _check(n_min: int, n_max: int, c: float | npt.ArrayLike) -> None:
    if not (0 <= n_min <= n_max) or n_max < 1:
        raise SpecdecError(f"need 0 <= n_min <= n_max and n_max >= 1, got n_min {n_min}, n_max {n_max}")
    draft_curve(c, n_max)


def threshold_prediction(law: ConfidenceLaw, taus: npt.ArrayLike, n_min: int, n_max: int, c: float | npt.ArrayLike,
                         verify_cost: npt.ArrayLike | None = None, keep_last: bool = False) -> RulePrediction:
    """The confidence threshold per tau (arrays [T]). Positions 1..n_min are always drafted; past
    them position i is drafted while every confidence so far (n_min < j <= i) is >= tau
    (`keep_last`: also the first token below tau, then stop). On track (every draft so far
    accepted) s_j = P(conf >= tau), g_j = P(conf >= tau and accepted), alpha_j = P(accepted) come
    from row j; past a rejection a look passes with o = P_off(conf >= tau) (forced positions:
    s_j = o = 1, g_j = alpha_j). With on_i = P(looks 1..i passed, 1..i accepted) = prod_{j<=i} g_j
    and off_i = P(looks 1..i passed, a rejection among 1..i) = on_{i-1} (s_i - g_i) + off_{i-1} o_i:

        drop: P(L >= i) = on_{i-1} s_i + off_{i-1} o_i,  P(1..i accepted) = on_i
        keep: P(L >= i) = on_{i-1} + off_{i-1},          P(1..i accepted) = on_{i-1} alpha_i

    E tokens = 1 + sum_{i <= n_max} P(1..i accepted); forwards F = L, plus the look at position L + 1
    that stopped a dropping rule (L < n_max); time = E[F c_F] + E v(L + 1), c_k the draft cost per
    forward of an iteration making k forwards (`draft_curve`; a scalar c: c E F). With one row and
    off = that row, P(L >= i) = prod s_j: positions independent given their bins."""
    _check(n_min, n_max, c)
    w, a = law.rows(n_max)
    above = law.above(taus).astype(float)  # [T, M]
    forced = np.arange(1, n_max + 1) <= n_min
    alpha = (w * a).sum(axis=1)  # [n_max]
    s_ = np.where(forced, 1.0, above @ w.T)  # [T, n_max]: s_j
    g = np.where(forced, alpha, above @ (w * a).T)  # [T, n_max]: g_j
    o = np.where(forced, 1.0, (above @ law.off)[:, None])  # [T, n_max]: o_j
    on, off = np.ones(s_.shape[0]), np.zeros(s_.shape[0])
    reach, accepted = np.empty_like(s_), np.empty_like(s_)
    for i in range(n_max):
        reach[:, i] = on + off if keep_last else on * s_[:, i] + off * o[:, i]
        accepted[:, i] = on * (alpha[i] if keep_last else g[:, i])
        on, off = on * g[:, i], on * (s_[:, i] - g[:, i]) + off * o[:, i]
    # drop: every iteration that stopped short of n_max spent one forward on the look that failed
    failed_looks = np.zeros(s_.shape[0]) if keep_last else 1.0 - reach[:, -1]
    tokens = 1.0 + accepted.sum(axis=1)
    drafts = reach.sum(axis=1)  # E L = sum_i P(L >= i)
    p_len = _length_law(reach)
    p_fwd = p_len if keep_last else np.concatenate([np.zeros((p_len.shape[0], 1)), p_len[:, :-2],
                                                    p_len[:, -2:].sum(axis=1, keepdims=True)], axis=1)  # P(F = 0..n)
    k = np.arange(n_max + 1)
    draft_time = p_fwd @ np.concatenate([[0.0], k[1:] * draft_curve(c, n_max)])
    time = draft_time + p_len @ verify_curve(verify_cost, n_max)
    return RulePrediction(tokens, drafts, drafts + failed_looks, time, tokens / time, p_len)


def _length_law(reach: FloatArray) -> FloatArray:
    """P(L = 0..n) from P(L >= i), i = 1..n ([..., n])."""
    ahead = np.concatenate([reach, np.zeros(reach.shape[:-1] + (1,))], axis=-1)  # P(L >= i), i = 1..n + 1
    return np.concatenate([1.0 - ahead[..., :1], ahead[..., :-1] - ahead[..., 1:]], axis=-1)


@dataclass(frozen=True)
class SchedulePrediction:
    """transformers' heuristic schedule: the stationary law of num_assistant_tokens n = 1..cap,
    the long-run tokens per iteration, time per iteration and speedup."""

    stationary: FloatArray  # [cap]: pi(n)
    expected_tokens: float
    iteration_time: float
    speedup: float
    full_acceptance: FloatArray  # [cap]: P(every drafted token accepted | n)


def heuristic_schedule(law: ConfidenceLaw, c: float | npt.ArrayLike, verify_cost: npt.ArrayLike | None = None,
                       cap: int = 32, tau: float = 0.0) -> SchedulePrediction:
    """n -> min(n + 2, cap) after a draft whose every token was accepted, else max(1, n - 1); each
    iteration drafts up to n tokens, stopping after the first below `tau` (kept, as transformers
    does; tau = 0: no threshold). P(full | n) = sum_m P(L = m, 1..m accepted): for m < n,
    prod_{j<m} g_j (alpha_m - g_m); for m = n, prod_{j<n} g_j alpha_n. The chain is irreducible on
    1..cap; pi solves pi P = pi; speedup = sum pi(n) E tokens(n) / sum pi(n) E time(n)."""
    if cap < 1:
        raise SpecdecError(f"cap must be >= 1, got {cap}")
    rows = [threshold_prediction(law, [tau], 0, n, c, verify_cost, keep_last=True) for n in range(1, cap + 1)]
    w, a = law.rows(cap)
    above = law.above([tau])[0].astype(float)
    g, alpha = (w * a) @ above, (w * a).sum(axis=1)
    prefix = np.concatenate([[1.0], np.cumprod(g)])  # prod_{j<m} g_j, m = 1..cap + 1
    full = np.array([sum(prefix[m - 1] * (alpha[m - 1] - g[m - 1]) for m in range(1, n)) + prefix[n - 1] * alpha[n - 1]
                     for n in range(1, cap + 1)])
    P = np.zeros((cap, cap))
    for n in range(1, cap + 1):
        P[n - 1, min(n + 2, cap) - 1] += full[n - 1]
        P[n - 1, max(1, n - 1) - 1] += 1.0 - full[n - 1]
    vals, vecs = np.linalg.eig(P.T)
    pi = np.real(vecs[:, np.argmin(np.abs(vals - 1.0))])
    pi = np.clip(pi / pi.sum(), 0.0, None)
    pi /= pi.sum()
    tokens = float(sum(p * r.expected_tokens[0] for p, r in zip(pi, rows)))
    time = float(sum(p * r.iteration_time[0] for p, r in zip(pi, rows)))
    return SchedulePrediction(pi, tokens, time, tokens / time, full)


@dataclass(frozen=True)
class StoppingPrediction:
    """The break-even rule at the rate lambda it achieves (its own speedup)."""

    rate: float  # lambda: tokens per target step, = the speedup
    prediction: RulePrediction


def optimal_stopping(law: ConfidenceLaw, c: float, verify_cost: npt.ArrayLike | None = None, n_max: int = 16,
                     grid: int = 4000, iterations: int = 50) -> StoppingPrediction:
    """The break-even rule. With i tokens drafted and rho = prod a over their bins (the chance all
    are accepted), look at position i + 1 (a draft forward, c) when its expected gain pays,
    E_b max(0, rho a_{i+1}(b) - lambda dv_{i+1}) >= lambda c; then draft it when rho a_{i+1}(b) >=
    lambda dv_{i+1}, dv_{i+1} = v(i + 2) - v(i + 1): a token is worth its chance of being accepted
    with all before it, and costs its share of the verify pass and of the draft at the rate
    lambda. lambda, the long-run rate (= the speedup), is the fixed point of lambda <- E tokens /
    E time (Dinkelbach's iteration from the best fixed gamma). The rule reads rho from the rows
    (it cannot tell a rejection); its rate is evaluated on track and past a rejection (`off`).
    Exact over the bins; rho on a log-grid of `grid` points (below 1e-12: the draft stops). One c
    for every forward (the rule weighs each look alone)."""
    _check(0, n_max, c)
    if np.ndim(c) != 0:
        raise SpecdecError("the break-even rule takes one draft cost c per forward, not a curve")
    v = verify_curve(verify_cost, n_max)
    w, a = law.rows(n_max)
    rate = float(max(threshold_prediction(law, [0.0], g, g, c, v).speedup[0] for g in range(1, n_max + 1)))
    rate = max(rate, 1.0)
    for _ in range(iterations):
        new = float(_break_even(w, a, law.off, v, c, rate, n_max, grid).speedup[0])
        done = abs(new - rate) <= 1e-9 * rate
        rate = new
        if done:
            break
    return StoppingPrediction(rate, _break_even(w, a, law.off, v, c, rate, n_max, grid))


def _break_even(w: FloatArray, a: FloatArray, off_w: FloatArray, v: FloatArray, c: float, rate: float, n_max: int,
                grid: int) -> RulePrediction:
    """E tokens, drafts, forwards and time of the break-even rule at `rate` (see optimal_stopping):
    the mass over rho split into on track (its bins from w_i) and past a rejection (from off_w)."""
    logs = np.linspace(np.log(1e-12), 0.0, grid)
    step = logs[1] - logs[0]
    on, off = np.zeros(grid), np.zeros(grid)
    on[-1] = 1.0  # rho = 1: nothing drafted yet
    tokens, drafts, forwards, time = 1.0, 0.0, 0.0, 0.0
    for i in range(n_max):
        rho = np.exp(logs)
        dv = v[i + 1] - v[i]
        gain = rho[:, None] * a[i][None, :]  # [grid, M]: rho a_{i+1}(b)
        take = gain >= rate * dv
        look = (w[i][None, :] * np.where(take, gain - rate * dv, 0.0)).sum(axis=1) >= rate * c
        time += ((on + off) * ~look).sum() * v[i]  # not looking: ends with i drafts
        on, off = on * look, off * look
        forwards += (on + off).sum()
        share_on, share_off = on[:, None] * w[i][None, :], off[:, None] * off_w[None, :]  # [grid, M]
        time += ((share_on + share_off) * ~take).sum() * v[i]  # looked and stopped: i drafts
        drafted_on, drafted_off = share_on * take, share_off * take
        tokens += (drafted_on * a[i][None, :]).sum()  # P(1..i+1 accepted)
        drafts += (drafted_on + drafted_off).sum()
        idx = np.clip(np.round((np.log(np.maximum(gain, 1e-300)) - logs[0]) / step).astype(int), 0, grid - 1).ravel()
        on = np.bincount(idx, weights=(drafted_on * a[i][None, :]).ravel(), minlength=grid)
        off = np.bincount(idx, weights=(drafted_on * (1.0 - a[i][None, :]) + drafted_off).ravel(), minlength=grid)
    time += (on + off).sum() * v[n_max] + c * forwards
    return RulePrediction(np.array([tokens]), np.array([drafts]), np.array([forwards]), np.array([time]),
                          np.array([tokens / time]))


@dataclass(frozen=True)
class StoppingPlan:
    """The best confidence threshold for a law, beside the best fixed gamma and the ceiling."""

    tau: float
    n_min: int
    n_max: int
    keep_last: bool
    speedup: float
    fixed_gamma: int
    fixed_speedup: float
    ceiling: float  # the break-even rule's rate

    @property
    def gain(self) -> float:
        """The threshold's speedup over the best fixed gamma's, relative (negative: a loss)."""
        return self.speedup / self.fixed_speedup - 1.0


def plan_stopping(law: ConfidenceLaw, c: float, verify_cost: npt.ArrayLike | None = None, max_n: int = 16,
                  n_mins: tuple[int, ...] = (0, 1, 2, 3), keep_last: bool = False) -> StoppingPlan:
    """The (tau, n_min, n_max) of the largest predicted speedup over tau on the law's bin edges,
    n_min in `n_mins` and n_max = max(1, n_min)..max_n (ties: the smaller n_max, then the larger
    tau: fewer drafts); the best fixed gamma in 1..max_n (the threshold's tau = 0 case) beside it."""
    taus = law.edges[:-1]
    best: tuple[float, float, int, int] | None = None
    for n_min in n_mins:
        for n_max in range(max(1, n_min), max_n + 1):
            speed = threshold_prediction(law, taus, n_min, n_max, c, verify_cost, keep_last).speedup
            i = int(np.flatnonzero(speed >= speed.max() * (1 - 1e-12))[-1])
            if best is None or speed[i] > best[0] * (1 + 1e-9):
                best = (float(speed[i]), float(taus[i]), n_min, n_max)
    fixed = [float(threshold_prediction(law, [0.0], g, g, c, verify_cost).speedup[0]) for g in range(1, max_n + 1)]
    g = int(np.argmax(fixed))
    ceiling = optimal_stopping(law, c, verify_cost, n_max=max_n).rate
    return StoppingPlan(best[1], best[2], best[3], keep_last, best[0], g + 1, fixed[g], ceiling)
