"""Batches in the engine: B concurrent clients against `llama-server -np B`, each configuration's
throughput beside no speculation's at the same B, and the ragged batch model's prediction
(`specdec.simulator.ragged`, the one `serve-bench` checks) from the engine's own t(B, k) (the
cost file of `specdec llamacpp costs --batch-sizes`) and the configuration's counts at the first
batch size (what it proposed and accepted per step, as the engine counted them).

Measured, per (configuration, B): throughput = B sum(n_i - 1) / sum(decode_ms_i) over the B
requests of a wave (each its own `timings.predicted_ms`, the prompt excluded; the B slots decode
at once, so a slot's time per step is the pass's), pooled over the waves and repeats; speedup = the
configuration's throughput / no speculation's, with a 95% bootstrap interval over the
(repeat, wave, slot) pairs (same prompt and seed). A round sends every prompt once, in waves of
B at once (slot i of wave w the prompt (w B + i + repeat) mod n), so that every B decodes the same
requests and the slots of a wave decode different ones, independent as the model has them (B
copies of one prompt draft in lockstep). Predicted: `predict_equal_split(joint, B, u, o)` —
llama.cpp puts every slot's pending token and drafts into one batch, and with one KV stream per
slot splits it into equal-length micro-batches (`specdec.simulator.equal_split`); u(r, m) is the
cost file's t(r, m) where timed, else priced by the micro-batch's tokens r m (`ubatch_seconds`),
and where the cost file timed the mixed steps of the configuration's draft length on B slots, the
speculating server's plain step and second micro-batches from them (`mixed_ubatches`; the plain
server's own step stays the baseline's) — with joint pi(k, n) at the first B from the server's
trace (every speculative server runs with LLAMA_TRACE=1: each verify step's drafted and accepted
tokens, per slot; `joint_from_steps`), else from its counters (`joint_from_counts`: the plain steps
at k = 0, the drafts' accepted law from the per-position counters, their lengths around the mean
draft G / D); o = c_acc E[N], the cost file's accepted-token cost. Beside it, the one-pass
prediction (`predict_ragged(..., packed=True)`: the batch decoded at once, as with
`--kv-unified`). Request i goes to slot i with its prompt cached there first, so that the B
slots start decoding together. The crossover: the smallest B from which on speculation stops
paying (`crossover`); its range: where the speedups' 95 % intervals let it lie (`crossover_range`).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from specdec.engines.llamacpp.client import Client, Completion
from specdec.engines.llamacpp.trace import traced_steps
from specdec.engines.llamacpp.validation import BOOTSTRAP, Config, Request, counter_deltas, counters, send
from specdec.engines.llamacpp.server import LlamaServer
from specdec.costfiles import mixed_steps
from specdec.errors import SpecdecError
from specdec.simulator.equal_split import mixed_ubatches, predict_equal_split, ubatch_seconds
from specdec.simulator.ragged import crossover, crossover_range, predict_ragged

SLOT_CTX = 2048  # context per slot (-c B * SLOT_CTX): a workload prompt, its answer and a draft


@dataclass
class BatchRecord:
    """One request of a round of B at once, and (on its slot 0 row) the round's counter deltas."""

    config: str
    batch: int
    repeat: int
    slot: int
    prompt: str
    tokens: int
    decode_ms: float
    prompt_tokens: int
    wave: int = 0
    drafts: int = 0  # the wave's, on slot 0 only (the server's counters are per server)
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)
    steps: list[list[int]] = field(default_factory=list)  # its verify steps' (drafted, accepted), traced servers
    own_counts: bool = False  # drafts, draft_tokens, accepted are this request's (`streams`), not its wave's
    prompt_evaluated: int = -1  # prompt tokens it evaluated (timings.prompt_n; 1: its prompt was cached)
    idle_ms: float = 0.0  # its slot's idle time just before it (`streams`: a restore and a round trip)


def request_record(label: str, B: int, repeat: int, slot: int, wave: int, prompt: str, done: Completion,
                   **fields) -> BatchRecord:
    """A request's record from its answer: tokens, decode time, context (the cached prompt too) and
    the prompt tokens it evaluated, as the engine's timings give them."""
    prompt_n = int(done.timings.get("prompt_n", 0))
    return BatchRecord(label, B, repeat, slot, prompt, done.tokens, done.decode_ms,
                       prompt_n + int(done.timings.get("cache_n", 0)), wave, prompt_evaluated=prompt_n, **fields)


def rotated(count: int, repeat: int) -> list[int]:
    """The configurations' order in repeat `repeat`: 0..count-1 rotated by the repeat (interleaved)."""
    return [(i + repeat) % count for i in range(count)]


def idle_share(records: Sequence[BatchRecord]) -> float:
    """The share of the records' slot time spent idle just before them (`idle_ms`)."""
    idle = sum(max(r.idle_ms, 0.0) for r in records)
    return idle / max(idle + sum(r.decode_ms for r in records), 1e-9)


def heads(records: Sequence[BatchRecord]) -> list[BatchRecord]:
    """The records that carry counts: each wave's slot 0 (the server's counters around the wave),
    or every request that counts its own."""
    return [r for r in records if r.own_counts or r.slot == 0]


def waves(n: int, B: int, repeat: int) -> list[list[int]]:
    """A round's waves: every one of n requests once (wrapping to fill the last), B at once, slot i
    of wave w request (w B + i + repeat) mod n."""
    return [[(w * B + i + repeat) % n for i in range(B)] for w in range(-(-n // B))]


def request_seed(seed: int, repeat: int, request: int) -> int:
    """A request's seed in repeat `repeat`: its sampling's and its synthetic acceptance's
    (`specdec.engines.llamacpp.synthetic`), whatever B and slot it runs at."""
    return seed + 1000 * repeat + request


def run_batches(binary, model, configs: Sequence[Config], requests: Sequence[Request], batch_sizes: Sequence[int],
                temperature: float, repeats: int, new_tokens: int, threads: int | None,
                log: Callable[[str], None] = lambda line: None, seed: int = 0) -> list[BatchRecord]:
    """Per B: every configuration's server (-np B) alive at once; each repeat, in a rotating order,
    one round per configuration: every request once, in waves of B at once (`waves`), each with its
    seed (`request_seed`: the same at every B and in every configuration, so rounds pair and a
    synthetic acceptance's draws are the same whoever shares the batch).
    Request i goes to slot i (`id_slot`) and decodes all
    `new_tokens` (`ignore_eos`: a slot that ended early would leave the others a smaller batch),
    its prompt cached there by a one-token request just before: otherwise the first slot to start
    decodes while the others' prompts are processed in the same batches, and its decode time
    holds their prompts (seen: 15.3 s against 4.6 s)."""
    records: list[BatchRecord] = []
    for B in batch_sizes:
        with ExitStack() as stack:
            # started from this thread: PR_SET_PDEATHSIG fires when the thread that forked the server ends
            servers = [stack.enter_context(LlamaServer(with_slots(c, model, threads, B), binary)) for c in configs]
            clients = [Client(s.url) for s in servers]
            for c in clients:
                c.complete("Hello", 4)  # warm-up, untimed
            for r in range(repeats):
                for i in rotated(len(configs), r):
                    for w, picks in enumerate(waves(len(requests), B, r)):
                        records += _wave(clients[i], servers[i], configs[i], B, r, w, [requests[j] for j in picks],
                                         temperature, new_tokens, [request_seed(seed, r, j) for j in picks])
                log(f"B={B} repeat {r + 1}/{repeats} done")
    return records


def with_slots(config: Config, model, threads: int | None, B: int):
    from dataclasses import replace

    return replace(config.server(model, threads, B * SLOT_CTX), parallel=B)


def _wave(client: Client, server: LlamaServer, config: Config, B: int, repeat: int, wave: int,
          picks: Sequence[Request], temperature: float, new_tokens: int, seeds: Sequence[int]) -> list[BatchRecord]:
    for i in range(B):  # each slot's prompt cached first, so that no slot decodes beside another's prompt
        send(client, picks[i], 1, temperature, seeds[i], id_slot=i, cache_prompt=True)
    before, logged = counters(client), len(server.log_text()) if config.traced else 0
    with ThreadPoolExecutor(B) as pool:
        done = list(pool.map(lambda i: send(client, picks[i], new_tokens, temperature, seeds[i], id_slot=i,
                                            cache_prompt=True, ignore_eos=True), range(B)))
    head, pos = counter_deltas(before, counters(client))
    traced = traced_steps(server, logged, head[0]) if config.traced else []
    out = [request_record(config.label, B, repeat, i, wave, picks[i].name, d,
                          steps=[[k, n] for slot, k, n in traced if slot == i])
           for i, d in enumerate(done)]
    out[0].drafts, out[0].draft_tokens, out[0].accepted = head
    out[0].per_pos = pos
    return out


# ---- prediction -------------------------------------------------------------------------

def joint_from_counts(steps: int, drafts: int, draft_tokens: int, per_pos: Sequence[int]) -> np.ndarray:
    """pi(k, n) [K + 1, K + 1] (counts) from what the engine counted over `steps` decode steps
    (plain and verify; a request of n tokens takes n - 1 - accepted): the steps without a draft
    at k = 0; the drafts' accepted law from the per-position counters (P(N >= i) = per_pos[i - 1]
    / D); a draft that accepted n > floor(G / D) tokens was at least n long (k = n), the others
    split between floor and floor + 1 so that the mean draft stays G / D (when the counts allow)."""
    plain = steps - drafts
    if drafts <= 0:
        return np.array([[max(plain, 1)]], dtype=float)
    reach = np.minimum.accumulate(np.concatenate([[drafts], np.asarray(per_pos, dtype=float)]))
    exact = reach - np.append(reach[1:], 0.0)  # drafts accepting exactly n, n = 0..
    lo = int(np.floor(draft_tokens / drafts))
    n = np.arange(exact.size)
    long_ = n > lo
    rest = exact[~long_].sum()
    share = 0.0 if rest <= 0 else float(np.clip(
        (draft_tokens - (n[long_] * exact[long_]).sum() - lo * rest) / rest, 0.0, 1.0))
    K = max(lo + 1, exact.size - 1)
    joint = np.zeros((K + 1, K + 1))
    joint[0, 0] = max(plain, 0)
    for i in n:
        if long_[i]:
            joint[i, i] += exact[i]
        else:
            joint[lo, i] += (1 - share) * exact[i]
            joint[lo + 1, i] += share * exact[i]
    return joint


def joint_from_steps(records: Sequence[BatchRecord]) -> np.ndarray | None:
    """pi(k, n) [K + 1, K + 1] (counts) from the requests' traced verify steps, each (drafted,
    accepted) where it happened, and their plain steps at (0, 0); None where the trace is missing
    or does not add up to the server's counters (then `joint_from_counts`)."""
    counted = heads(records)
    steps = [tuple(s) for r in records for s in r.steps]
    if not steps or len(steps) != sum(r.drafts for r in counted) or sum(n for _, n in steps) != sum(
            r.accepted for r in counted):
        return None
    K = max(k for k, _ in steps)
    joint = np.zeros((K + 1, K + 1))
    np.add.at(joint, tuple(np.asarray(steps).T), 1.0)
    joint[0, 0] = sum(max(r.tokens - 1, 1) for r in records) - len(steps) - sum(n for _, n in steps)
    return joint


def _at_context(cost_data: dict, context: float, rows_of: Callable[[dict], list | None]) -> dict[int, np.ndarray]:
    """{B: the row of B in each table's `rows_of(table)` (a list per batch size)} at `context` tokens,
    linear between the contexts of the cost file's tables that hold such rows, clamped."""
    tables = cost_data["batch_timing"] if isinstance(cost_data["batch_timing"], list) else [cost_data["batch_timing"]]
    tables = sorted((t for t in tables if rows_of(t) is not None), key=lambda t: t.get("context_tokens") or 0)
    lengths = [t.get("context_tokens") or 0 for t in tables]
    out = {}
    for B in tables[0]["batch_sizes"] if tables else []:
        rows = np.array([rows_of(t)[t["batch_sizes"].index(B)] for t in tables])
        out[int(B)] = np.array([np.interp(context, lengths, rows[:, k]) for k in range(rows.shape[1])])
    return out


def batch_seconds(cost_data: dict, context: float) -> dict[int, np.ndarray]:
    """{B: t(B, 1..K)} from the cost file at `context` tokens (linear between its contexts, clamped)."""
    return _at_context(cost_data, context, lambda t: t["seconds"])


def mixed_seconds(cost_data: dict, context: float) -> dict[int, dict[int, np.ndarray]]:
    """{K: {B: t_mix(B, 0..B)}} from the cost file at `context` tokens (linear between its contexts,
    clamped): the mixed steps `specdec llamacpp costs --mixed-k` timed; {} where it timed none."""
    tables = cost_data["batch_timing"] if isinstance(cost_data["batch_timing"], list) else [cost_data["batch_timing"]]
    ks = sorted({K for t in tables for K in mixed_steps(t) if isinstance(K, int)})
    return {K: _at_context(cost_data, context, lambda t: mixed_steps(t).get(K)) for K in ks}


def speculating_ubatches(u: np.ndarray, B: int, longest: int, mixed: dict[int, dict[int, np.ndarray]]
                         ) -> tuple[np.ndarray, bool]:
    """u(r, m) of the speculating server at B slots whose longest draft is `longest` tokens: from the
    cost file's mixed steps where they were timed at that draft length (`mixed_ubatches`), else `u`
    (the plain server's); and whether the mixed steps priced it."""
    steps = mixed.get(longest + 1, {})
    if B in steps:
        return mixed_ubatches(u, steps[B], longest + 1), True
    return u, False


@dataclass
class BatchPoint:
    """One (configuration, B): measured against no speculation at the same B, and predicted."""

    config: str
    batch: int
    throughput: float  # tokens/s over the B slots
    base_throughput: float
    measured: float
    interval: tuple[float, float]
    predicted: float
    pairs: int
    tokens_per_step: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def _throughput(rows: Sequence[BatchRecord], B: int) -> float:
    return B * sum(max(r.tokens - 1, 1) for r in rows) / (sum(r.decode_ms for r in rows) / 1000)


def points(records: Sequence[BatchRecord], cost_data: dict, accept_seconds: float, seed: int = 0) -> list[dict]:
    """Per configuration (not `none`): its points per B and the measured and predicted crossovers."""
    rng = np.random.default_rng(seed)
    sizes = sorted({r.batch for r in records})
    context = float(np.mean([r.prompt_tokens + r.tokens / 2 for r in records]))
    seconds = batch_seconds(cost_data, context)
    mixed = mixed_seconds(cost_data, context)
    missing = [B for B in sizes if B not in seconds]
    if missing:
        raise SpecdecError(f"the cost file has no t(B, k) for B = {missing}: measure them "
                           "(`specdec llamacpp costs --batch-sizes`)")
    key = lambda r: (r.batch, r.repeat, r.wave, r.slot)  # noqa: E731
    base = {key(r): r for r in records if r.config == "none"}
    labels = list(dict.fromkeys(r.config for r in records if r.config != "none"))
    out = []
    for label in labels:
        first = [r for r in records if r.config == label and r.batch == sizes[0]]
        counted = heads(first)
        width = max((len(r.per_pos) for r in counted), default=0)
        per_pos = [sum(r.per_pos[i] for r in counted if i < len(r.per_pos)) for i in range(width)]
        joint = joint_from_steps(first)
        if joint is None:
            joint = joint_from_counts(sum(max(r.tokens - 1, 1) for r in first) - sum(r.accepted for r in counted),
                                      sum(r.drafts for r in counted), sum(r.draft_tokens for r in counted), per_pos)
        e_accepted = float((joint.sum(axis=0) @ np.arange(joint.shape[1])) / joint.sum())
        rows = []
        for B in sizes:
            pairs = [(base[key(r)], r) for r in records if r.config == label and r.batch == B and key(r) in base]
            u = ubatch_seconds(seconds, B, joint.shape[0])
            o = accept_seconds * e_accepted
            longest = max(k for k in range(joint.shape[0]) if joint[k].sum() > 0)  # not the joint's padded width
            u_spec, by_mixed = speculating_ubatches(u, B, longest, mixed)
            split = predict_equal_split(joint, B, u_spec, o, rng, base_step=float(u[B - 1, 0]))
            one_pass = predict_ragged(joint, B, u[B - 1], o, packed=True)

            def ratio(idx: np.ndarray) -> float:
                return _throughput([pairs[i][1] for i in idx], B) / _throughput([pairs[i][0] for i in idx], B)

            boot = [ratio(rng.integers(0, len(pairs), len(pairs))) for _ in range(BOOTSTRAP)]
            steps = sum(max(r.tokens - 1, 1) for _, r in pairs) - sum(r.accepted for r in heads([r for _, r in pairs]))
            point = BatchPoint(label, B, _throughput([c for _, c in pairs], B), _throughput([b for b, _ in pairs], B),
                               ratio(np.arange(len(pairs))),
                               (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))),
                               float(split.prediction.speedup), len(pairs),
                               sum(max(r.tokens - 1, 1) for _, r in pairs) / steps)
            rows.append(point.__dict__ | {"error": point.error, "predicted_one_pass": float(one_pass.speedup),
                                          "error_one_pass": float(one_pass.speedup) / point.measured - 1,
                                          "decodes_per_step": split.decodes,
                                          "priced_by": "mixed steps" if by_mixed else "t(B, k)",
                                          "prompt_passes": sum(r.prompt_evaluated > 1 for pair in pairs for r in pair),
                                          "idle_share": idle_share([r for _, r in pairs]),
                                          "base_idle_share": idle_share([b for b, _ in pairs]),
                                          "iteration_standard_error": split.iteration_standard_error})
        out.append({"config": label, "context": context, "points": rows,
                    "crossover": crossover(sizes, [p["measured"] for p in rows]),
                    "crossover_range": crossover_range(sizes, [p["interval"] for p in rows]),
                    "predicted_crossover": crossover(sizes, [p["predicted"] for p in rows]),
                    "joint": joint.tolist()})
    return out


def render(result: dict) -> str:
    """Per temperature and configuration: the speedup per B, measured and predicted, and the crossovers."""
    lines = []
    for at in result["temperatures"]:
        for c in at["configs"]:
            low, high = c["crossover_range"]
            lines.append(f"{c['config']} T={at['temperature']:g}: crossover measured B={c['crossover']} "
                         f"(the 95 % intervals: B={low} to B={high}), predicted B={c['predicted_crossover']} "
                         "(None: still pays at the largest B)")
            for p in c["points"]:
                lines.append(f"  B={p['batch']:<3}{p['measured']:>8.3f}x  [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]"
                             f"  predicted {p['predicted']:.3f}x ({100 * p['error']:+.1f}%; one packed pass "
                             f"{p['predicted_one_pass']:.3f}x, {100 * p['error_one_pass']:+.1f}%)  {p['throughput']:.1f} vs "
                             f"{p['base_throughput']:.1f} tokens/s, {p['tokens_per_step']:.2f} tokens a step"
                             + (f"; {p['prompt_passes']} requests evaluated their prompt" if p.get("prompt_passes")
                                else "")
                             + (f"; slots idle {100 * p['idle_share']:.1f} % vs {100 * p['base_idle_share']:.1f} %"
                                if p.get("idle_share") else ""))
    return "\n".join(lines)
