"""A ragged batch in an engine that keeps one KV stream per slot: llama.cpp's server with
`-np B` (`kv_unified` false) splits each step's batch into equal-length micro-batches.

Each step, slot s feeds f_s = 1 + K_s tokens (its pending token and its K_s drafts), the slots in
order. llama.cpp (vendored 0c1e570, `llama_batch_allocr::split_equal(n_ubatch, sequential=true)`,
called by `llama_kv_cache::init_batch` when there is more than one stream) takes from the first
slot with tokens left the longest run of consecutive slots that all have tokens left, feeds each
of them m = the run's smallest remainder, and repeats until every token is fed:

    feeds (1, 5)        -> 2 rows x 1, then 1 row x 4            (two decodes, two weight reads)
    feeds (5, 1, 5)     -> 3 rows x 1, then 1 row x 4, 1 row x 4  (three)
    feeds (5, 5)        -> 2 rows x 5                             (one, as one packed pass)

A micro-batch of r rows of m tokens costs u(r, m) seconds (the caller's table: the engine's
t(r, m) with every row feeding m tokens, `specdec llamacpp costs --batch-sizes`), so a step with
proposals K = (K_1..K_B) costs split(K) = sum over its micro-batches u(r, m), and, rows
independent with (K_s, N_s) ~ pi(k, n) each as in `specdec.simulator.ragged`:

    E[iteration]  = E[split(K)] + B o,
    throughput(B) = B E[N + 1] / E[iteration],
    speedup(B)    = throughput(B) / (B / (u(B, 1) + B o_0)).

E[split(K)] depends on the slots' order, so for a measured pi it is averaged over `samples` steps
drawn with the caller's generator (`predict_equal_split`, its standard error reported; the latency
law is the drawn rows'); when every slot drafts gamma tokens on a share s of its steps, the plan's
case, it has a closed form over the runs of drafting slots (`drafting_share_seconds`). When
every slot feeds the same count this is `predict_ragged(packed=True)` priced at u(B, 1 + K); a slot
that drafts beside one that does not costs one more decode, which at a memory-bound step (one read
of the weights each) is what takes speculation's gain away at B > 1.

Assumed: the slots draft independently, as requests arriving at random moments do. Slots that
start together on prompts of one kind draft in phase, fewer steps mix drafting and plain slots, and
this under-predicts them (up to −13 %); their own B = 1 step sequences priced side by side by the
same rule (`split_decodes`, benchmarks/bench_llamacpp_replay_batches.py) predict them within 7 %.
B clients sending back to back out of phase (`engines/llamacpp/streams.py`) gain less from
batching, as this model says, and it falls within 10 % of them but still low at B >= 4 (−6 to
−8 % at Q4_1, four runs; benchmarks/RESULTS.md), where the check's own timeline replayed from the
same B = 1 steps is within 4.5 %: about 2 points are the check's slots sitting out steps between
requests, the rest how its streams mix feeds. Not modelled here: slots that are idle mid-batch (a
finished request between two decoding ones also breaks the run; the replays have them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.batch import BatchPlan, check_batch_times
from specdec.simulator.positional import positional_expected_tokens_by_gamma
from specdec.simulator.ragged import RaggedPrediction, check_joint


@dataclass(frozen=True)
class SplitPrediction:
    """The ragged prediction under the equal split, its Monte Carlo standard error (seconds of
    E[iteration]) and the mean number of micro-batches (decodes) a step."""

    prediction: RaggedPrediction
    iteration_standard_error: float
    decodes: float


def split_decodes(feeds: npt.ArrayLike) -> list[tuple[int, int]]:
    """The micro-batches, (rows, tokens per row), of one step's slot feeds (B,) under the module
    doc's rule (for reading and for tests; `split_seconds` is the vectorised one)."""
    rem, out = np.array(feeds, dtype=np.int64), []
    while (rem > 0).any():
        first = int(np.argmax(rem > 0))
        end = first
        while end < rem.size and rem[end] > 0:
            end += 1
        m = int(rem[first:end].min())
        out.append((end - first, m))
        rem[first:end] -= m
    return out


def split_seconds(feeds: npt.ArrayLike, u: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per step of feeds [steps, B] (each >= 1): (seconds, decodes) under the equal split, a
    micro-batch of r rows x m tokens priced u(r, m) = u[r - 1, m - 1]."""
    rem = np.array(np.atleast_2d(feeds), dtype=np.int64)
    u = np.asarray(u, dtype=np.float64)
    steps, B = rem.shape
    if rem.min() < 1:
        raise SpecdecError("every slot feeds at least its pending token")
    if u.ndim != 2 or u.shape[0] < B or u.shape[1] < rem.max() or not np.all(np.isfinite(u)) or u.min() <= 0:
        raise SpecdecError(f"u(r, m) must be positive seconds for r = 1..{B}, m = 1..{rem.max()}")
    seconds, decodes = np.zeros(steps), np.zeros(steps, dtype=np.int64)
    slot = np.arange(B)
    while True:
        active = rem > 0
        live = active.any(axis=1)
        if not live.any():
            return seconds, decodes
        first = np.argmax(active, axis=1)
        after = slot[None, :] >= first[:, None]
        run = after & active & (np.cumsum(after & ~active, axis=1) == 0)
        m = np.where(run, rem, np.iinfo(np.int64).max).min(axis=1)
        rows = run.sum(axis=1)
        seconds[live] += u[rows[live] - 1, m[live] - 1]
        decodes += live
        rem -= np.where(run, m[:, None], 0)


def ubatch_seconds(seconds: Mapping[int, npt.ArrayLike], rows: int, width: int) -> np.ndarray:
    """u(r, m) [rows, width]: one decode of r slots feeding m tokens each, from t(B, k) timed at
    some (B, k) (`seconds`: {B: t(B, 1..K)}, an engine's cost file). As timed where timed;
    elsewhere priced by the decode's tokens r m, linear between the timed (B, k) read as B k tokens
    (their mean where several share a count), the last slope beyond. At the batch check's contexts
    a decode's cost follows its token count, not how the tokens divide among slots (llama.cpp, f32,
    264 tokens: t(2, 1) 48.8 ms, t(1, 2) 47.6; t(8, 1) 81.9, t(4, 2) 83.8, t(2, 4) 82.9 —
    benchmarks/RESULTS.md)."""
    by_tokens: dict[int, list[float]] = {}
    seconds = {int(B): np.asarray(t, dtype=np.float64) for B, t in seconds.items()}
    for B, t in seconds.items():
        for k, x in enumerate(t, 1):
            by_tokens.setdefault(B * k, []).append(float(x))
    n = np.array(sorted(by_tokens), dtype=float)
    s = np.array([np.mean(by_tokens[int(x)]) for x in n])
    tokens = np.arange(1, rows + 1)[:, None] * np.arange(1, width + 1)[None, :]
    u = np.interp(tokens, n, s)
    if n.size > 1:
        beyond = tokens > n[-1]
        u[beyond] = s[-1] + (s[-1] - s[-2]) / (n[-1] - n[-2]) * (tokens[beyond] - n[-1])
    for B, t in seconds.items():
        if B <= rows:
            u[B - 1, :min(width, t.size)] = t[:width]
    return u


def mixed_ubatches(u: npt.ArrayLike, mixed: Sequence[float], k: int) -> np.ndarray:
    """u(r, m) [B, width] of a speculating server whose mixed steps were timed (`mixed`: t_mix(B, r)
    for r = 0..B, the first r of B slots verifying k tokens, the rest feeding one, on the server
    that drafts k - 1: `engines/llamacpp/costs.py`): its plain step u(B, 1) = t_mix(B, 0), the
    second micro-batch u(r, k - 1) = t_mix(B, r) - t_mix(B, 0) for r < B and u(B, k) = t_mix(B, B);
    the other entries as in `u`. On the AVX-512 EPYC at f32 the split priced from steps timed on
    other servers missed the B = 2 point of the check out of phase by -14 % twice; priced from these,
    every point of two later runs came within 3.8 % and 5.9 %, from t(B, k) alone 7 of 8 within 10 %
    (benchmarks/RESULTS.md, "The EPYC rows")."""
    out = np.array(u, dtype=np.float64)
    B, t = out.shape[0], np.asarray(mixed, dtype=np.float64)
    if t.shape != (B + 1,) or not np.all(np.isfinite(t)) or t.min() <= 0 or not 2 <= k <= out.shape[1]:
        raise SpecdecError(f"mixed steps: need t_mix(B, r) > 0 for r = 0..{B} and 2 <= k <= {out.shape[1]}")
    second = t[1:B] - t[0]
    if second.size and second.min() <= 0:
        raise SpecdecError("mixed steps: a step with drafting slots timed no slower than the plain step "
                           f"({[round(1e3 * x, 2) for x in t]} ms): too noisy to price micro-batches by")
    out[B - 1, 0], out[B - 1, k - 1] = t[0], t[B]
    out[:B - 1, k - 2] = second
    return out


def predict_equal_split(joint: npt.ArrayLike, batch: int, u: npt.ArrayLike, overhead: float,
                        rng: np.random.Generator, base_overhead: float = 0.0, samples: int = 40_000,
                        base_step: float | None = None) -> SplitPrediction:
    """The module doc's prediction at batch size `batch` from pi(k, n) (`joint`), u(r, m)
    (`u`, r = 1..batch, m = 1..K + 1: `ubatch_seconds`, `mixed_ubatches`) and the per-row overheads
    o, o_0 (seconds); the plain server's step u(batch, 1) is `base_step` where given (a speculating
    server's own plain step can differ: `mixed_ubatches`)."""
    p = check_joint(joint)
    if batch < 1:
        raise SpecdecError(f"batch size must be >= 1, got {batch}")
    if samples < 2:
        raise SpecdecError(f"samples must be >= 2, got {samples}")
    if not all(np.isfinite(x) and x >= 0 for x in (overhead, base_overhead)):
        raise SpecdecError("the per-row overheads must be finite seconds >= 0")
    flat = rng.choice(p.size, size=(samples, batch), p=p.reshape(-1))
    k, n = np.divmod(flat, p.shape[1])
    seconds, decodes = split_seconds(k + 1, u)
    step = seconds + batch * overhead
    iteration = float(step.mean())
    tokens = float(p.sum(axis=0) @ (np.arange(p.shape[0]) + 1))  # E[N + 1], exact
    throughput = batch * tokens / iteration
    plain = float(np.asarray(u)[batch - 1, 0]) if base_step is None else float(base_step)
    base = batch / (plain + batch * base_overhead)
    values = (step[:, None] / (n + 1)).reshape(-1)
    weights = (n + 1).reshape(-1).astype(np.float64)
    prediction = RaggedPrediction(batch, iteration, throughput, throughput / base, values, weights / weights.sum())
    return SplitPrediction(prediction, float(step.std(ddof=1) / np.sqrt(samples)), float(decodes.mean()))


def drafting_share_seconds(batch: int, gamma: int, share: float, u: npt.ArrayLike) -> float:
    """E[split(K)] exactly when each of B slots independently drafts gamma tokens (feeds gamma + 1)
    with probability s and feeds its one token otherwise: every slot drafting is one decode
    u(B, gamma + 1); else the first micro-batch feeds every slot one token, u(B, 1), and each
    maximal run of r consecutive drafting slots then its gamma drafts, u(r, gamma):

        E = s^B u(B, gamma + 1) + (1 - s^B) u(B, 1) + sum_{r < B} u(r, gamma) E[runs of exactly r],
        E[runs of exactly r] = sum_{i = 0}^{B - r} s^r (1 - s)^[i > 0] (1 - s)^[i + r < B]."""
    t = np.asarray(u, dtype=np.float64)
    if gamma == 0 or share <= 0.0:
        return float(t[batch - 1, 0])
    out = share ** batch * t[batch - 1, gamma] + (1 - share ** batch) * t[batch - 1, 0]
    for r in range(1, batch):
        runs = sum(share ** r * (1 - share) ** ((i > 0) + (i + r < batch)) for i in range(batch - r + 1))
        out += t[r - 1, gamma - 1] * runs
    return float(out)


def equal_split_plan(alphas: npt.ArrayLike, batch_sizes: Sequence[int], seconds: npt.ArrayLike, c: float,
                     max_gamma: int | None = None, share: float | None = None,
                     mixed: Mapping[int, Mapping[int, Sequence[float]]] | None = None) -> BatchPlan:
    """`simulator.batch.batch_plan`'s table for an engine that splits its batches (module doc):
    each of B slots drafts on a share s of its steps (None: every step) gamma tokens accepted with
    alpha_1..alpha_K, independently of the other slots (`drafting_share_seconds`, exact), and
    drafting costs s gamma c t(B, 1) a step; seconds[b, k - 1] = t(batch_sizes[b], k) as in
    `batch_plan`, u(r, m) from them (`ubatch_seconds`). With s = 1 every slot feeds gamma + 1
    tokens: one decode, `batch_plan`. With `mixed` ({K: {B: t_mix(B, 0..B)}}, the speculating
    servers' own steps) a draft length gamma = K - 1 is priced by them at each B they were timed at
    (`mixed_ubatches`; no speculation stays at t(B, 1)), and at a B between two such sizes by its
    price from t(B, k) times the ratio of the two prices there, linear in B (`_mixed_ratio`)."""
    b, t = check_batch_times(batch_sizes, seconds)
    s = 1.0 if share is None else float(share)
    if not 0.0 < s <= 1.0:
        raise SpecdecError(f"a draft share must lie in (0, 1], got {share}")
    top = t.shape[1] - 1 if max_gamma is None else min(int(max_gamma), t.shape[1] - 1)
    tokens = 1.0 + s * (positional_expected_tokens_by_gamma(alphas, top) - 1.0)
    split = np.zeros((b.size, top + 1))
    timed = {int(B): row for B, row in zip(b, t)}
    for i, B in enumerate(b.tolist()):
        u = ubatch_seconds(timed, B, top + 1)
        split[i] = [drafting_share_seconds(B, g, s, u) for g in range(top + 1)]
    for K, steps in (mixed or {}).items():
        if 2 <= K <= top + 1:
            split[:, K - 1] *= _mixed_ratio(b, timed, K, s, steps)
    iteration = split + s * np.arange(top + 1) * c * t[:, :1]
    return BatchPlan(b, tokens, iteration, tokens * t[:, :1] / iteration, b[:, None] * tokens / iteration,
                     iteration / tokens)


def _mixed_ratio(b: np.ndarray, timed: Mapping[int, np.ndarray], K: int, s: float,
                 steps: Mapping[int, Sequence[float]]) -> np.ndarray:
    """Per batch size of `b`: E[split] at gamma = K - 1 priced by the mixed steps over its price from
    t(B, k), where both are known (B in `steps` and in `b`), linear in B between (ends held)."""
    at = sorted(int(B) for B in steps if int(B) in timed)
    if not at:
        return np.ones(b.size)
    ratios = []
    for B in at:
        u = ubatch_seconds(timed, B, K)
        ratios.append(drafting_share_seconds(B, K - 1, s, mixed_ubatches(u, steps[B], K))
                      / drafting_share_seconds(B, K - 1, s, u))
    return np.interp(b, at, ratios)
