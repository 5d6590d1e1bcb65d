"""The engine's own step costs, measured inside llama-server: t(B, k), one step of B slots each
verifying k tokens, at a given context length, and the cost of each accepted token beyond the
first (`accept_seconds`). Written as a cost file `specdec plan --batch-cost-file` reads
(kind `specdec.estimate`, one `batch_timing` table per context; method: docs/engines.md). A table's
`context_tokens` is the mean context over its timed decode, the prompt plus half the new tokens, as
the validation reads a request's (prompt + tokens / 2); files written before 2026-11-27 06:20 UTC
hold the prompt alone, 32 tokens less at 64 new tokens.

How a step is made a k-token verify: `--spec-type ngram-simple` with `--spec-ngram-simple-size-m
k - 1` drafts k - 1 tokens whenever the last size-n tokens occurred before, at least k - 1 tokens
back (common/ngram-map.cpp, `common_ngram_simple_draft`); `--spec-synth-rates 0,...,0` rejects
every draft (tools/server/server-context.cpp, `server_sample_and_accept_synth`), so each step
verifies k tokens and emits one, the target's own. The prompt is a fixed sequence of numbers
repeated (a period of up to 40 numbers, ~110 tokens; shorter where a short context is asked for,
never shorter than the longest draft timed needs), which the target at T = 0 keeps repeating: every
step finds a match. Contexts matter: a k-token verify attends k queries over L cached keys, so its
cost grows with k L (Q4_1 on the EPYC: t(13) 101 ms at 235 tokens, 124 at 530; t(1) 13.7 and 15.2),
and a prompt of 91 tokens verified at the price timed at 296 was over-priced by ~10 % at k = 13.
The server's own counters show it (drafts per step and tokens per draft are recorded beside each
time); steps that drafted nothing or drafted fewer tokens are corrected for, not assumed away.
With rates 1,...,1 instead every draft is accepted: the extra time per accepted token is
`accept_seconds` (sampling each accepted position and the per-token bookkeeping).

Steps that mix drafting and plain slots (`mixed_ks`, each K >= 2): on the server of B slots that
verifies K tokens, the first r slots on the cost prompt and the other B - r on numbers
(`noise_prompt`), r = 0..B - 1, every token decoded: t_mix(B, r), the step of feeds (K, ..., K, 1,
..., 1) as that very server runs it. The equal split cuts it into u(B, 1) and u(r, K - 1), so
t_mix(B, r) - t_mix(B, 0) is what the second micro-batch costs there; a B-slot check whose drafts are
K - 1 long, and the plan's batch table at gamma = K - 1, price their steps by them
(`simulator.equal_split.mixed_ubatches`). Why not from t(r, K - 1) timed on its own server: on the
AVX-512 EPYC at f32 a (5, 1) step on `-np 2` cost 50.6 ms where u(2, 1) + u(1, 4) priced it at 61.2
(and (5, 5) 52.4): the same verify costs up to 26 % more or less on servers whose -np, draft length or
-ub differ, the same kernel slower (perf), the same for every process of one configuration
(docs/engines.md, "What a micro-batch costs depends on the server"). The plain slots must draft
nothing, but greedy the target continues the numbers into loops (" 21 149 21 149 ...") that the
lookup finds (f32, lookup 4, 64 tokens: 45 of 63 steps drafted at 167 tokens, 10 at 700; Q4_1 9 at
167), so they sample with a presence penalty over the whole context (`noise_sampling`): every token
they emit is new, no lookup of any length matches it (0 of 126 steps at lookups 1, 2 and 4), and what
the penalty costs (f32: 0.04-0.18 ms a step at B = 1, 0.6 at B = 4; Q4_1, run 6's cost file: 0.12-1.32
ms, 1.7-2.6 % of the plain step) is timed in pairs on the plain server and taken off (`_mixed_row`).
Measured on the EPYC, 2026-11-29.
"""
from __future__ import annotations

import functools
import random
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.draft_loop import loop_config, loop_entry, sample_counts, target_part
from specdec.engines.llamacpp.metrics import PROMETHEUS
from specdec.engines.counts import prometheus_counters
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, build_info, no_repack
from specdec.errors import SpecdecError

PERIOD = 40  # numbers per period of the cost prompt at most (~110 tokens: longer than any draft timed)
TOKENS_PER_NUMBER = 2.85  # SmolLM2's tokenizer: " 17" is three tokens, " 5" two (measured: 341 tokens for 120)
MAX_K = PERIOD * 2  # a draft cannot be longer than the period it copies from
NOISE_PAIRS = 3  # the noise's sampling cost, 1-2.5 % of a step: pairs with and without it each repeat, the median


def noise_sampling(slot_tokens: int) -> dict:
    """The plain slots' sampling in a mixed step: a presence penalty over the slot's whole context
    (`slot_tokens`), so no token they emit occurred before and no lookup matches (module doc)."""
    return {"presence_penalty": 1000.0, "repeat_last_n": int(slot_tokens)}
NOISE_TOKENS_PER_NUMBER = 3.7  # numbers below 1000 in SmolLM2's tokenizer (measured: 156 tokens for 42)


def cost_prompt(tokens: int, max_k: int = MAX_K) -> str:
    """About `tokens` tokens (at least two periods) of a fixed sequence of numbers, repeated: its
    period 40 numbers, or as few as fit two periods in `tokens` while a period (each number at
    least two tokens) still holds a draft of max_k - 1 tokens and the 8-token pattern before it."""
    rng = random.Random(0)
    numbers = [str(rng.randrange(0, 100)) for _ in range(PERIOD)]
    period = min(PERIOD, max(-(-(max_k + 8) // 2), round(tokens / (2 * TOKENS_PER_NUMBER))))
    count = max(2 * period, round(tokens / TOKENS_PER_NUMBER))
    return " ".join(numbers[i % period] for i in range(count))


@functools.lru_cache(maxsize=None)
def noise_prompt(tokens: int) -> str:
    """About `tokens` tokens of random numbers below 1000 (a fixed seed) in which no 4 tokens repeat
    in the same order where SmolLM2 splits a number into its space and its digits (a candidate that
    would repeat four is drawn again; in its real tokens none repeats at 167 and 338 tokens, 8 at
    1038). What the target continues it with, greedy, loops and would draft; `noise_sampling` keeps
    it from repeating any token (module doc; `_mixed_row` checks)."""
    rng, seen, out, last = random.Random(7), set(), [], ()
    for _ in range(max(8, round(tokens / NOISE_TOKENS_PER_NUMBER))):
        for _attempt in range(1000):
            number = str(rng.randrange(0, 1000))
            stream = last + (" ",) + tuple(number)
            grams = {stream[i:i + 4] for i in range(len(stream) - 3)}
            if not grams & seen:
                break
        seen |= grams
        out.append(number)
        last = stream[-3:]
    return " ".join(out)


def synth_config(model: Path, k: int, rate: float, parallel: int, ctx: int, threads: int | None) -> ServerConfig:
    """A server whose every step drafts k - 1 tokens (when the context repeats) and accepts each
    with probability `rate` (unconditional rates rate**i ... here all equal: 0 or 1)."""
    if k == 1:
        return ServerConfig(model, parallel=parallel, ctx_size=ctx, threads=threads)
    m = k - 1
    extra = ("--spec-ngram-simple-size-n", str(min(m, 8)), "--spec-ngram-simple-size-m", str(m),
             "--spec-synth-rates", ",".join([f"{rate:g}"] * m))
    return ServerConfig(model, spec_type="ngram-simple", parallel=parallel, ctx_size=ctx, threads=threads, extra=extra)


def counters(client: Client) -> np.ndarray:
    """(drafts, draft tokens, accepted tokens) on the server's /metrics page."""
    totals, _ = prometheus_counters(client.metrics(), PROMETHEUS, PROMETHEUS + "num_accepted_tokens_per_pos")
    return np.array([totals.get(PROMETHEUS + "num_" + key, 0.0) for key in ("drafts", "draft_tokens",
                                                                            "accepted_tokens")])


@dataclass
class Sample:
    """One timed batch: B requests at once, their decode time and the server's counter deltas."""

    ms: float  # sum over the B requests of timings.predicted_ms
    steps: int  # sum over the B requests of decode steps (predicted_n - 1: the first token comes with the prompt)
    prompt_tokens: int
    drafts: int
    draft_tokens: int
    accepted: int


def timed_batch(client: Client, prompts: Sequence[str], new_tokens: int,
                extra: Sequence[dict] | None = None, **options) -> Sample:
    """len(prompts) raw-text requests at once (T = 0; `options` into each body, `extra[i]` into
    request i's), with the counters around them. Request i goes to slot i with its prompt cached
    there first (a one-token request): otherwise the first slot to start decodes while the others'
    prompts are processed in the same batches, and its decode time holds their prompts (`batches.py`)."""
    for i, prompt in enumerate(prompts):
        client.complete(prompt, 1, temperature=0.0, id_slot=i, cache_prompt=True)
    before = counters(client)
    with ThreadPoolExecutor(len(prompts)) as pool:
        done = list(pool.map(lambda i: client.complete(prompts[i], new_tokens, temperature=0.0, id_slot=i,
                                                       cache_prompt=True, **{**options, **(extra[i] if extra else {})}),
                             range(len(prompts))))
    delta = (counters(client) - before).astype(int)
    return Sample(sum(d.decode_ms for d in done), sum(max(d.tokens - 1, 1) for d in done),
                  int(done[0].timings.get("prompt_n", 0)) + int(done[0].timings.get("cache_n", 0)),
                  *delta.tolist())


def step_seconds(sample: Sample, k: int, t_plain: float | None) -> tuple[float, float, float]:
    """(t(k) seconds, share of steps that drafted, mean draft length) of a rates-0 sample: its
    steps are D verifies of ~k tokens and (steps - D) plain ones at t_plain."""
    per_step = sample.ms / 1000 / sample.steps
    if k == 1:
        return per_step, 0.0, 0.0
    share = sample.drafts / sample.steps
    if share < 0.5 or t_plain is None:
        raise SpecdecError(f"the cost prompt drafted at {sample.drafts} of {sample.steps} steps for k = {k}: the "
                           "target did not keep repeating it (another model?); no t(k) measured")
    return (per_step - (1 - share) * t_plain) / share, share, sample.draft_tokens / max(sample.drafts, 1)


def measure(binary: Path, model: Path, ks: tuple[int, ...], batch_sizes: tuple[int, ...],
            contexts: tuple[int, ...], repeats: int, new_tokens: int, threads: int | None,
            log=lambda line: None, drafts: tuple[Path, ...] = (), mixed_ks: tuple[int, ...] = ()) -> dict:
    """t(B, k) at each context and the accepted-token cost: every k's server alive at once per
    batch size, k in a rotating order each repeat (interleaved), the median kept. Each GGUF of
    `drafts` is timed too (B = 1, with the first batch size's servers): its own plain step t_d(1)
    at each context (c = t_d(1) / t(1)), and what it costs inside the speculative loop, its batch pass
    and looks (`draft_loop.py`), beside the target at the k timed: `draft_seconds` in the file.
    For each K of `mixed_ks` (each one of `ks`, >= 2), each batch size's K server times the mixed
    steps t_mix(B, r) too (module doc), in the same rotation: each raw row's `mixed`."""
    if ks[0] != 1 or max(ks) > MAX_K:
        raise SpecdecError(f"draft lengths: k must start at 1 and stay at most {MAX_K}")
    if any(K not in ks or K < 2 for K in mixed_ks):
        raise SpecdecError(f"the mixed steps' verify lengths must be timed k of at least 2, got {list(mixed_ks)}")
    tables, raw = [], []
    accept: list[float] = []
    draft_samples: dict[str, dict[int, list[Sample]]] = {}
    loop_samples: dict[str, dict[int, list]] = {}
    for B in batch_sizes:
        ctx = B * (max(*contexts, 3 * 2 * PERIOD) + new_tokens + max(ks) + 64)  # the prompt is >= 2 periods
        plain = noise_sampling(ctx // B)
        with ExitStack() as stack:
            clients = {k: Client(stack.enter_context(LlamaServer(synth_config(model, k, 0.0, B, ctx, threads),
                                                                 binary)).url) for k in ks}
            if B == batch_sizes[0]:
                acc_ks = [k for k in (4, 8) if k <= max(ks)]
                accept_clients = {k: Client(stack.enter_context(LlamaServer(
                    synth_config(model, k, 1.0, 1, ctx, threads), binary)).url) for k in acc_ks}
            else:
                accept_clients = {}
            draft_clients = {d: Client(stack.enter_context(LlamaServer(
                ServerConfig(d, ctx_size=ctx, threads=threads), binary)).url) for d in drafts} \
                if B == batch_sizes[0] else {}
            loop_clients = {(str(d), m): Client(stack.enter_context(LlamaServer(
                loop_config(model, d, m, ctx, threads), binary)).url)
                for d in drafts for m in range(min(4, max(ks) - 1) + 1)} if B == batch_sizes[0] else {}
            for c in [*clients.values(), *accept_clients.values(), *draft_clients.values(), *loop_clients.values()]:
                c.complete("Hello", 4)  # warm-up, untimed
            per: dict[int, dict[int, list]] = {L: {k: [] for k in ks} for L in contexts}
            mixed = {L: {K: {m: [] for m in range(B)} for K in mixed_ks} for L in contexts}  # [L][K][r]: Samples
            sampling: dict[int, list[tuple[Sample, Sample]]] = {L: [] for L in contexts}  # with, without
            for r in range(repeats):
                for L_index, L in enumerate(contexts):
                    prompt = cost_prompt(L, max(ks))
                    order = list(ks[r % len(ks):] + ks[:r % len(ks)])
                    for k in order:
                        per[L][k].append(timed_batch(clients[k], [prompt] * B, new_tokens))
                        if k in mixed_ks:  # every token decoded: a slot that stopped early would leave the mix
                            noise = noise_prompt(per[L][k][-1].prompt_tokens)
                            for m in range(B):
                                mixed[L][k][m].append(timed_batch(clients[k], [prompt] * m + [noise] * (B - m),
                                                                  new_tokens, [{}] * m + [plain] * (B - m),
                                                                  ignore_eos=True))
                    if mixed_ks:  # what the noise's sampling costs a step of B plain slots (`_mixed_row`): pairs
                        noise = noise_prompt(per[L][1][-1].prompt_tokens)
                        for i in range(NOISE_PAIRS):  # with and without, which goes first in turns
                            runs = [("with", plain), ("without", {})][::1 if i % 2 == 0 else -1]
                            pair = {x: timed_batch(clients[1], [noise] * B, new_tokens, [extra] * B, ignore_eos=True)
                                    for x, extra in runs}
                            sampling[L].append((pair["with"], pair["without"]))
                    for d, c in draft_clients.items():
                        draft_samples.setdefault(str(d), {}).setdefault(L, []).append(timed_batch(c, [prompt],
                                                                                                 new_tokens))
                    latest = {k: v[-1] for k, v in per[L].items()}  # this repeat's t(k) samples
                    row = _repeat_row(latest, max(ks)) if loop_clients or accept_clients else []
                    if loop_clients:
                        keys = list(loop_clients)
                        for d, m in keys[r % len(keys):] + keys[:r % len(keys)]:
                            s = timed_batch(loop_clients[d, m], [prompt], new_tokens)
                            loop_samples.setdefault(d, {}).setdefault(L_index, []).append(
                                (m, *sample_counts(m, s.steps, s.draft_tokens),
                                 s.ms / 1000 - target_part(s.steps, s.drafts, s.draft_tokens, row)))
                    if accept_clients:  # every context: a sample is a difference of two servers' times
                        accept += _accept_costs(accept_clients, row, prompt, new_tokens)
                log(f"B={B} repeat {r + 1}/{repeats} done")
            for L in contexts:
                t1 = float(np.median([s.ms / 1000 / s.steps for s in per[L][1]]))
                row, shares, means = [], [], []
                for k in ks:
                    values = [step_seconds(s, k, t1) for s in per[L][k]]
                    row.append(float(np.median([v[0] for v in values])))
                    shares.append(float(np.mean([v[1] for v in values])))
                    means.append(float(np.mean([v[2] for v in values])))
                prompt_tokens = per[L][1][0].prompt_tokens
                context = prompt_tokens + new_tokens // 2  # the mean over the timed decode, as a request's is read
                # the k each t was timed at: 1 + the mean draft (drafts near a request's end are cut to the
                # tokens it has left, n_remaining - 1: server_slot::get_n_draft_max)
                k_eff = [1.0] + [1.0 + d for d in means[1:]]
                noise_cost = float(np.median([a.ms / a.steps - b.ms / b.steps for a, b in sampling[L]])) / 1000 \
                    if mixed_ks else 0.0  # what the noise's sampling costs a step of B plain slots
                raw.append({"B": B, "context_tokens": context, "prompt_tokens": prompt_tokens, "k": list(ks),
                            "k_timed": k_eff, "seconds": row,
                            "draft_share": shares, "mean_draft": means,
                            "all_seconds": {k: [s.ms / 1000 / s.steps for s in per[L][k]] for k in ks}}
                           | ({"mixed": [_mixed_row(mixed[L][K], _dense(k_eff, row, max(ks))[K - 1], K, B, noise_cost)
                                         for K in mixed_ks]} if mixed_ks else {}))
                log(f"B={B} L={context}: " + " ".join(f"t({k})={1e3 * t:.1f}ms" for k, t in zip(ks, row)))
    data = _cost_file(binary, model, ks, batch_sizes, contexts, raw, accept, repeats, new_tokens, threads)
    if draft_samples:
        data["draft_seconds"] = {
            d: {"context_tokens": [per[L][0].prompt_tokens + new_tokens // 2 for L in contexts],
                "seconds": [float(np.median([s.ms / 1000 / s.steps for s in per[L]])) for L in contexts],
                "all_seconds": [[s.ms / 1000 / s.steps for s in per[L]] for L in contexts]}
            for d, per in draft_samples.items()}
        for d, row in data["draft_seconds"].items():
            row["loop"] = loop_entry(row["context_tokens"], loop_samples[d])
            log(f"draft {d}: t_d(1) " + " ".join(f"{1e3 * t:.2f}ms" for t in row["seconds"]) + "; in the loop "
                + " ".join(f"P0 {1e3 * a:.2f} P1 {1e3 * b:.2f} s {1e3 * c:.2f}ms" for a, b, c in
                           zip(row["loop"]["batch_pass"], row["loop"]["per_token"], row["loop"]["look"]))
                + " at " + ",".join(map(str, row["context_tokens"])) + " tokens")
    depth = data["batch_timing"][0]["context_tokens"]
    data["llama_bench"] = {"depth": depth, "seconds": bench_seconds(binary, model, ks, depth, threads),
                           "what": "llama-bench -p K -n 0 -d DEPTH: one pass over k tokens, last logits only"}
    return data


def bench_seconds(binary: Path, model: Path, ks: tuple[int, ...], depth: int, threads: int | None,
                  repeats: int = 3) -> dict[int, float] | None:
    """llama-bench's time of one pass over k tokens at `depth` (its pp test: the last position's
    logits only, no sampling), best of `repeats`; None when there is no llama-bench beside the server."""
    import json
    import subprocess

    bench = binary.parent / "llama-bench"
    if not bench.is_file():
        return None
    argv = [str(bench), "-m", str(model), "-p", ",".join(map(str, ks)), "-n", "0", "-d", str(depth), "-r",
            str(repeats), "-o", "json"] + ([] if threads is None else ["-t", str(threads)]) \
        + (["--repack", "0"] if no_repack() else [])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=900).stdout
        return {int(row["n_prompt"]): min(row["samples_ns"]) / 1e9 for row in json.loads(out)}
    except (subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
        raise SpecdecError(f"llama-bench failed: {str(exc)[:200]}") from None


def _accept_costs(clients: dict[int, Client], curve: list[float], prompt: str, new_tokens: int) -> list[float]:
    """Seconds per accepted token beyond the verify itself: rates-1 requests (every draft accepted)
    against t(1..K) of the same repeat's rates-0 samples (`_repeat_row`), at the drafts' own mean length."""
    out = []
    for k, client in clients.items():
        s = timed_batch(client, [prompt], new_tokens)
        if s.drafts and s.accepted:
            k_mean = 1 + s.draft_tokens / s.drafts
            plain = s.steps - s.drafts - s.accepted
            t_verify = float(np.interp(k_mean, np.arange(1, len(curve) + 1), curve))
            out.append((s.ms / 1000 - s.drafts * t_verify - plain * curve[0]) / s.accepted)
    return out


def _mixed_row(samples: dict[int, list[Sample]], full: float, k: int, B: int, d: float) -> dict:
    """A raw row's mixed steps at verify length k: t_mix(B, r) for r = 0..B (r = B: the row's t(B, k),
    read at k from its dense row). The B - r plain slots sample with `noise_sampling`, whose cost d a
    step of B plain slots is timed on the plain server in pairs, with and without it (`measure`,
    recorded as `sampling_seconds`): (B - r) d / B comes off each step. Each is then corrected as
    `step_seconds` corrects t(B, k): the drafting slots (one prompt at T = 0: in phase) drafted at a
    share q_r of the steps, the rest were plain steps t_mix(B, 0), so t_mix(B, r) = t0 + (mean step -
    t0) / q_r, q_r = (B share_r - (B - r) share_0) / r; and the share of the slots' steps that drafted
    in each (`share`, r / B where the plain slots drafted nothing)."""
    raw = [[s.ms / 1000 / s.steps - (B - r) * d / B for s in samples[r]] for r in range(B)]
    shares = [float(np.mean([s.drafts / s.steps for s in samples[r]])) for r in range(B)]
    if shares[0] > 0.1:
        raise SpecdecError(f"k = {k}: the plain slots' numbers drafted at {100 * shares[0]:.0f} % of their steps: "
                           "no mixed steps timed (another model?)")
    t0 = float(np.median(raw[0]))
    seconds = [t0]
    for r in range(1, B):
        q = (B * shares[r] - (B - r) * shares[0]) / r
        if q < 0.5:
            raise SpecdecError(f"k = {k}: the drafting slots of a mixed step drafted at {100 * q:.0f} % of their steps")
        seconds.append(t0 + (float(np.median(raw[r])) - t0) / q)
    return {"k": k, "seconds": seconds + [full], "share": shares, "sampling_seconds": d}


def _repeat_row(latest: dict[int, Sample], top: int) -> list[float]:
    """t(1..top) from one repeat's rates-0 samples, each k at the drafts' own mean length."""
    t1 = latest[1].ms / 1000 / latest[1].steps
    timed = [(1.0, t1)] + [(1 + s.draft_tokens / s.drafts, step_seconds(s, k, t1)[0])
                           for k, s in latest.items() if k > 1 and s.drafts]
    return _dense([k for k, _ in timed], [t for _, t in timed], top)


def _dense(k_timed: list[float], seconds: list[float], top: int) -> list[float]:
    """t(1..top), linear between the k timed (the file's k must be 1, 2, ..., K); past the
    longest timed k, the line through the last two (t is near-linear in k here: docs/engines.md)."""
    k, t = np.asarray(k_timed), np.asarray(seconds)
    order = np.argsort(k)
    k, t = k[order], t[order]
    grid = np.arange(1, top + 1, dtype=float)
    out = np.interp(grid, k, t)
    slope = (t[-1] - t[-2]) / max(k[-1] - k[-2], 1e-9)
    out[grid > k[-1]] = t[-1] + slope * (grid[grid > k[-1]] - k[-1])
    return [float(x) for x in out]


def _cost_file(binary, model, ks, batch_sizes, contexts, raw, accept, repeats, new_tokens, threads) -> dict:
    tables = []
    for L_index in range(len(contexts)):
        rows = [r for r in raw if r["B"] in batch_sizes]
        rows = [rows[i * len(contexts) + L_index] for i in range(len(batch_sizes))]
        tables.append({"batch_sizes": list(batch_sizes),
                       "seconds": [_dense(r["k_timed"], r["seconds"], max(ks)) for r in rows],
                       "context_tokens": int(np.median([r["context_tokens"] for r in rows])),
                       "device": "llama-server (CPU)", "timed_k": list(ks)}
                      | ({"mixed": [{"k": m["k"], "seconds": [r["mixed"][i]["seconds"] for r in rows]}
                                    for i, m in enumerate(rows[0]["mixed"])]} if "mixed" in rows[0] else {}))
    first = tables[0]["seconds"][0]
    info = build_info(binary)
    return {"kind": "specdec.estimate", "source": "llama-server",
            "verify_cost": [max(1.0, t / first[0]) for t in first],
            "cost": {"target_step_seconds": first[0]},
            "batch_timing": tables,
            "accept_seconds": float(np.median(accept)) if accept else None,
            "accept_seconds_samples": accept,
            "engine": {"name": "llama.cpp", "commit": info.get("llama_cpp_commit"), "sdist": info.get("sdist"),
                       "version": info.get("version"), "build_flags": info.get("flags"), "binary": str(binary),
                       "model": str(model),
                       "server_flags": "--spec-type ngram-simple --spec-ngram-simple-size-n min(k-1,8) "
                                       "--spec-ngram-simple-size-m k-1 --spec-synth-rates 0,...,0 -np B"
                                       + (" --no-repack" if no_repack() else ""),
                       "threads": threads},
            "method": {"repeats": repeats, "new_tokens": new_tokens, "timed_k": list(ks),
                       "interpolated": "t(k) linear between the k timed (raw[].k_timed: 1 + the mean draft)",
                       "measured_at": time.strftime(
                           "%Y-%m-%d %H:%M UTC", time.gmtime())},
            "raw": raw}
