"""Serving-scale measurement: ragged batches of B requests, every method timed by the one harness.

For each context length (held-out prompts of that many tokens) and batch size B, plain batched
decoding and each drafter at each gamma run as methods of `specdec.reference.measure.harness`
(interleaved, rotated, in `blocks` blocks, the baseline first and last in each: `measure`'s bracket,
as the validation runs it): a method decodes the prompt queue with B slots and
continuous batching until `max(B, prompts) x new_tokens` tokens are out (every pass has all B
slots busy), greedy. Measured per method: throughput (tokens/s over the batch, decode seconds:
the prompts' encodings are excluded), the speedup over plain batched decoding (the harness's
speedup: the ratio of seconds per token, with its 95% interval over blocks), per-token latency
p50/p99, goodput (throughput counting only requests whose time per output token met the bound).
Latency is predicted at the median only: the ragged model's latency law spreads the pass widths
but not the time of one pass, so its p99 is the p50's law, not the tail the machine adds (B = 1,
context 128: 55 ms measured, 31 predicted). p99 is reported as measured.
The crossover: the smallest B from which on every speedup is below 1; its range: where the 95 %
intervals let it lie (`simulator.ragged.crossover_range`).

Predicted per method with `specdec.simulator.ragged`: its (fed, accepted) law (a token tree feeds
its nodes: a heads lattice's pass is priced by them, and t(B, k) is timed up to the largest tree
the drafters can propose, `Drafter.max_nodes`) and its
per-row drafting/verdict seconds from its own B = 1 run, t(B, k, L) timed through the same
scorer at L = prompt + new_tokens / 2 before every block of the decodes at that B, the median over
the blocks taken (so B > 1 is predicted from batch-1 quantities and the pass-time tables only; this
machine's speed drifts within a run's minutes, so the tables span the minutes of the decodes they
price). A draft model drafts every row in one forward, so its share of the per-row seconds does not
grow as B times one row's: its own t_d(B, k), k = 1, 2, is timed likewise, through the step
`NeuralSlots` runs (the forward, then the pick and its append: `neural.draw`), a pass's
drafting d(B) is its first forward over what the verdicts committed and a one-token step per
further token of the longest proposal (`simulator.ragged.draft_pass_seconds`) plus, per step, the
proposing work around it that the smallest batch measured beyond its steps (bookkeeping), and the
per-row rest (the verdicts) is what the smallest batch's run spent beyond d(B_min). The drafting
each pass measured (`draft_pass_seconds`: the proposals alone, timed by the step) stands beside
d(B); at B_min it is d's calibration, at every larger B a prediction.
Method and numbers: docs/batching.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from specdec.reference.core.batch_loop import BatchResult, decode_batch
from specdec.reference.model.batch_scorer import BatchScorer
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.drafters.protocol import Drafter, NoDrafter
from specdec.reference.estimate.batch_timing import median_over_blocks, time_batched_passes
from specdec.reference.measure.harness import Run, measure
from specdec.reference.measure.speedup import speedup
from specdec.simulator.ragged import (crossover, crossover_range, draft_pass_seconds, longest_proposal,
                                      predict_ragged, weighted_quantile)

GREEDY = SamplingConfig(0.0)


@dataclass(frozen=True)
class ServeConfig:
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    contexts: tuple[int, ...] = (128, 1024)  # prompt tokens
    gammas: tuple[int, ...] = (2, 4)
    new_tokens: int = 24
    prompts: int = 8
    blocks: int = 2
    timing_repeats: int = 3
    layout: str = "padded"
    slo_ms: float = 150.0  # the time-per-output-token bound of goodput


@dataclass(frozen=True, eq=False)
class Batched:
    """A harness method: the prompt queue decoded with `scorer.rows` slots (gamma 0 with the
    NoDrafter: plain batched decoding). The harness's prompt is [block]: where the queue starts."""

    name: str
    scorer: BatchScorer
    queue: list[list[int]]
    budget: int
    drafter: Drafter = field(default_factory=NoDrafter)
    gamma: int = 0

    def decode(self, scorer, prompt, new_tokens, sampling, generator, eos_id, fuse_prefill) -> BatchResult:
        seed = None if generator is None else generator.initial_seed()
        return decode_batch(self.scorer, self.drafter, self.queue, new_tokens, self.gamma, sampling, seed,
                            eos_id=eos_id, token_budget=self.budget, start_at=int(prompt[0]) % len(self.queue))


def summarize(runs: Sequence[Run], slo_seconds: float) -> dict[str, Any]:
    """A method's runs at one batch size, pooled: throughput, latency, goodput, its law and overhead."""
    results: list[BatchResult] = [r.result for r in runs]
    seconds = sum(r.seconds for r in runs)
    tokens = sum(r.tokens for r in runs)
    lat = [x.token_latencies() for x in results]
    values, weights = np.concatenate([v for v, _ in lat]), np.concatenate([w for _, w in lat])
    req_s = np.concatenate([x.request_seconds for x in results])
    req_t = np.concatenate([x.request_tokens for x in results])
    met = req_t[req_s / np.maximum(req_t, 1) <= slo_seconds].sum() / req_t.sum() if req_t.sum() else 0.0
    busy = sum(int(np.count_nonzero(x.emitted)) for x in results)
    overhead = sum(sum(x.iteration_seconds) - sum(x.pass_seconds) for x in results) / busy
    size = max(len(x.joint) for x in results)  # a tree drafter's joint grows with its nodes
    joint = sum(np.pad(x.joint, (0, size - len(x.joint))) for x in results)
    passes = sum(x.passes for x in results)
    return {"throughput": tokens / seconds, "tokens": tokens, "seconds": seconds, "passes": passes,
            "draft_pass_seconds": sum(sum(x.draft_seconds) for x in results) / max(passes, 1),
            "latency_p50": weighted_quantile(values, weights, 0.5),
            "latency_p99": weighted_quantile(values, weights, 0.99),
            "tpot_met": float(met), "goodput": float(met) * tokens / seconds, "row_overhead": overhead,
            "joint": joint.tolist(), "alpha": DecodeStats.total([x.stats for x in results]).alpha()}


def serve_bench(model: torch.nn.Module, prompt_sets: dict[int, list[list[int]]],
                drafters: dict[str, Drafter], config: ServeConfig,
                progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """The module doc's measurement over prompt_sets[context] (held-out prompts of `context` tokens)
    and drafters[name]; returns the tables as plain values (strict-JSON ready)."""
    max_gamma = max(config.gammas)
    max_fed = max([max_gamma] + [d.max_nodes(g) for d in drafters.values() for g in config.gammas])  # trees' nodes
    out: dict[str, Any] = {"config": config.__dict__ | {"batch_sizes": list(config.batch_sizes),
                                                         "contexts": list(config.contexts),
                                                         "gammas": list(config.gammas)},
                           "contexts": []}
    for context, prompts in prompt_sets.items():
        timed_at, text = context + config.new_tokens // 2, prompts[0] + prompts[-1]
        # what is timed before each block (None: the target's t(B, k); a name: that draft model's step)
        timed_models = {None: (model, max_fed + 1, False)} | {
            name: (d.draft_model, 2, True) for name, d in drafters.items()
            if getattr(d, "draft_model", None) is not None}
        progress(f"context {context}: t(B, k), k = 1..{max_fed + 1}, timed before each of the {config.blocks} blocks "
                 f"at B = {list(config.batch_sizes)}")
        blocks: dict[str | None, dict[int, list]] = {name: {} for name in timed_models}  # {name: {B: [BatchTiming]}}
        prefixes: dict = {}
        measured: dict[str, dict[int, dict[str, Any]]] = {}
        for b in config.batch_sizes:
            for name in timed_models:
                blocks[name][b] = []

            def time_steps(b: int = b) -> None:
                """t(B, k) and each draft model's t_d(B, 1..2), timed before every block of the decodes
                at B: this machine's speed drifts within a run."""
                for name, (timed, max_k, draft_step) in timed_models.items():
                    blocks[name][b].append(time_batched_passes(timed, text, [b], timed_at, max_k, config.timing_repeats,
                                                               layout=config.layout, draft_step=draft_step))

            scorer = BatchScorer(model, b, context + config.new_tokens + max_fed + 2, config.layout, prefixes)
            budget = max(b, len(prompts)) * config.new_tokens
            methods = [Batched("baseline", scorer, prompts, budget)] + [
                Batched(method_name(name, g), scorer, prompts, budget, drafter, g)
                for name, drafter in drafters.items() for g in config.gammas]
            for m in methods:  # warm-up: first-call allocations count against no method
                decode_batch(scorer, m.drafter, prompts, 2, m.gamma, GREEDY, None, token_budget=b)
            runs = measure(methods, _Clock(scorer.output_device), [[j] for j in range(config.blocks)],
                           config.new_tokens, GREEDY, between=time_steps, bracket="baseline")
            for m in methods:
                row = summarize(runs[m.name], config.slo_ms / 1000)
                comparison = speedup(runs["baseline"], runs[m.name])
                row.update(speedup=comparison.speedup, ci=list(comparison.ci))
                measured.setdefault(m.name, {})[b] = row
                progress(f"context {context} B={b} {m.name}: {row['throughput']:.1f} tokens/s, speedup "
                         f"{comparison.speedup:.3f} [{comparison.ci[0]:.3f}, {comparison.ci[1]:.3f}]")
            del scorer
        target_blocks = blocks.pop(None)
        timing = median_over_blocks(target_blocks)
        draft_steps = {name: _by_batch(median_over_blocks(by_b)) for name, by_b in blocks.items()}
        drafting = {method_name(name, g): steps for name, steps in draft_steps.items() for g in config.gammas}
        out["contexts"].append({"context": context, "timed_at": timed_at, "timing": timing.to_dict(),
                                "timing_blocks": _block_seconds(target_blocks), "draft_step_seconds": draft_steps,
                                "draft_step_blocks": {name: _block_seconds(by_b) for name, by_b in blocks.items()},
                                "methods": _with_predictions(measured, timing, config, drafting)})
    return out


def method_name(drafter: str, gamma: int) -> str:
    return f"{drafter} gamma={gamma}"


def _by_batch(timing) -> dict[int, list[float]]:
    """{B: [t(B, 1), t(B, 2), ...]} of a batch timing."""
    return {b: list(row) for b, row in zip(timing.batch_sizes, timing.seconds)}


def _block_seconds(by_batch: dict[int, list]) -> dict[int, list[list[float]]]:
    """{B: [each block's t(B, 1..k)]}."""
    return {b: [t.seconds[0] for t in timings] for b, timings in by_batch.items()}


def _with_predictions(measured: dict[str, dict[int, dict[str, Any]]], timing, config: ServeConfig,
                      drafting: dict[str, dict[int, list[float]]] | None = None) -> list[dict[str, Any]]:
    """Each method's points with their predictions; drafting: {method: {B: t_d(B, 1..2)}} for the
    methods whose draft model drafts every row in one forward (module doc)."""
    sizes = list(config.batch_sizes)
    table = dict(zip(timing.batch_sizes, timing.seconds))
    base1 = measured["baseline"][sizes[0]]
    rows = []
    for name, by_b in measured.items():
        first = by_b[sizes[0]]
        draft = _draft_seconds(first, sizes, (drafting or {}).get(name))
        per_row = max(first["row_overhead"] - draft[sizes[0]] / sizes[0], 0.0)  # the verdicts' rest
        points = []
        for b in sizes:
            pred = predict_ragged(first["joint"], b, table[b], per_row, base1["row_overhead"], draft_seconds=draft[b])
            m = by_b[b]
            points.append(m | {"batch": b, "predicted_speedup": pred.speedup, "predicted_throughput": pred.throughput,
                               "predicted_p50": pred.latency_quantile(0.5),  # no p99: module doc
                               "predicted_draft_seconds": draft[b], "error": pred.speedup / m["speedup"] - 1})
        rows.append({"method": name, "points": points,
                     "crossover": crossover(sizes, [p["speedup"] for p in points]),
                     "crossover_range": crossover_range(sizes, [p["ci"] for p in points]),
                     "predicted_crossover": crossover(sizes, [p["predicted_speedup"] for p in points])})
    return rows


def _draft_seconds(first: dict[str, Any], sizes: Sequence[int], steps: dict[int, list[float]] | None
                   ) -> dict[int, float]:
    """{B: d(B)}: the draft's forwards (`draft_pass_seconds`) plus, per forward, the proposing
    work around it (sampling, bookkeeping) that the smallest batch's run measured beyond them."""
    if not steps:
        return {b: 0.0 for b in sizes}
    forwards = {b: draft_pass_seconds(first["joint"], b, steps[b]) for b in sizes}
    looks = {b: longest_proposal(first["joint"], b) for b in sizes}
    b0 = sizes[0]
    around = max(first["draft_pass_seconds"] - forwards[b0], 0.0) / looks[b0] if looks[b0] > 0 else 0.0
    return {b: forwards[b] + around * looks[b] for b in sizes}


class _Clock:
    """The harness asks its scorer for a device only; the methods hold their batch scorer."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
