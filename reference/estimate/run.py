"""`run_estimate`: the whole of `specdec estimate` as one library call — alpha of a drafter with
its interval (split over torchrun's processes when there are several), the costs c, c_hat,
v(k) and the hardware's floor, and with batch sizes t(B, k). Returns the JSON-ready report the
command renders. Names follow Leviathan et al.; the method: docs/estimator.md.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.costfiles import KIND_ESTIMATE
from specdec.reference.data.prompts import PromptSource
from specdec.reference.distributed.ranks import Placement

DEFAULT_CONTEXT = 128  # t(B, k) alone (--drafter none) is timed at this context unless one is given
FEW_PROMPTS = 10  # below this many prompts the bootstrap interval over prompts is flagged as unreliable


@dataclass(frozen=True)
class EstimateConfig:
    """One `specdec estimate` job (every value already checked by the caller).

    target: the model folder; drafter: a drafter spec (`specdec.reference.drafters.spec`);
    tokens: target-sampled positions to score per prompt category (ceil(tokens / new_tokens /
    samples_per_prompt) prompts of each category of `source`, each continued samples_per_prompt
    times, every continuation with its own generator); batch_size: prompts per generation batch (a torchrun
    process's unit of work; teacher-forced passes take up to 8); bootstrap: resamples of the
    interval; context / max_k / timing_repeats: the timing of v(1..max_k), at `context` tokens
    or, None, at each category's median prompt length + new_tokens / 2 (the context its
    continuations are scored at); contexts: the other lengths t(1..max_k) is timed at (the
    table `plan --context` interpolates), None: the category's shortest prompt and its longest
    prompt + new_tokens; timing False: alpha only; batch_sizes / batch_max_k: also t(B, k).
    """

    target: Path
    drafter: str
    placement: Placement = field(default_factory=Placement)
    dtype: str = "float32"
    backend: str = "auto"
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    tokens: int = 10_000
    new_tokens: int = 128
    source: PromptSource = field(default_factory=PromptSource)
    lenience: tuple[float, ...] = (1.0, 0.5, 0.3, 0.1)
    batch_size: int = 16
    bootstrap: int = 2000
    context: int | None = None
    contexts: tuple[int, ...] | None = None
    max_k: int = 16
    timing_repeats: int = 7
    timing: bool = True
    batch_sizes: tuple[int, ...] | None = None
    batch_max_k: int = 8
    seed: int = 0
    samples_per_prompt: int = 1
    confidence_top_k: int = 0  # the confidence law's: the top probability renormalised over the top k (0: all)

    def max_gamma(self, draft) -> int:
        """Longest block the replay records: max_k - 1, at most 8 unless the drafter drafts
        deterministic chains (their blocks cost a lookup: llama.cpp's n-gram drafts run to 32 and
        more; a token tree is drafted again at every draft length)."""
        return self.max_k - 1 if draft.deterministic and not draft.tree else min(self.max_k - 1, 8)


def run_estimate(config: EstimateConfig) -> dict[str, Any] | None:
    """The estimate (see the module doc); None on torchrun ranks other than 0, whose share of
    the prompts went to rank 0. With several prompt categories: one estimate per category under
    "categories" (alpha, its interval and the costs at the category's context)."""
    from specdec.reference.model.models import load_model
    from specdec.reference.model.placement import output_device
    from specdec.reference.data.encoder_inputs import load_target_prompts
    from specdec.reference.distributed.collect import gather_shares
    from specdec.reference.distributed.ranks import process_group
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.estimate.shares import score_chunks

    place, ranks = config.placement, config.placement.ranks

    def work():  # every rank: load (kept here), then sample and score its chunks of each category (gathered)
        target = load_model(config.target, place.device, config.dtype, config.backend, place.device_map)
        draft, note = make_drafter(config.drafter, target, place.device, config.dtype, place.draft_device_map)
        repeat = config.samples_per_prompt
        prompt_set = load_target_prompts(target, math.ceil(config.tokens / config.new_tokens / repeat), config.source)
        generator = torch.Generator(device=output_device(target.model)).manual_seed(config.seed)
        shares, width = {}, config.max_gamma(draft)
        for category in prompt_set.category_names():
            ids = [p for p in prompt_set.of(category) for _ in range(repeat)]
            names = [n for n, c in zip(prompt_set.names, prompt_set.categories) if c == category for _ in range(repeat)]
            shares[category] = score_chunks(target.model, {config.drafter: draft}, ids,
                                            ranks.share(len(ids), config.batch_size), config.new_tokens,
                                            config.sampling, config.seed, target.vocab_size, config.lenience,
                                            min(config.batch_size, 8), width, generator=generator,
                                            progress=ranks.main, sources=names,
                                            confidence_top_k=config.confidence_top_k)
        return (target, draft, note, prompt_set), shares

    start = time.perf_counter()
    with process_group(ranks, place.device):
        gathered = gather_shares(ranks, work)
    if gathered is None:  # not rank 0: its share is with rank 0
        return None
    alpha_seconds = time.perf_counter() - start
    (target, draft, note, prompt_set), parts = gathered
    with draft:
        reports = {category: _category_estimate(config, target, draft, note, [part[category] for part in parts],
                                                prompt_set, category, alpha_seconds)
                   for category in prompt_set.category_names()}
    first = next(iter(reports.values()))
    if len(reports) == 1:
        return {**first, "prompt_set": prompt_set.describe()}
    shared = ("kind", "drafter", "target", "backend", "backend_seconds", "note", "device", "device_map", "sampling",
              "new_tokens", "processes", "seed")
    return {**{k: first[k] for k in shared}, "prompt_set": prompt_set.describe(), "categories": reports,
            "warnings": [f"{c}: {w}" for c, r in reports.items() for w in r["warnings"]]}


def _category_estimate(config: EstimateConfig, target, draft, note, parts, prompt_set, category: str,
                       alpha_seconds: float) -> dict[str, Any]:
    """One category's estimate: alpha from its merged shares, and the costs at its context."""
    from specdec.reference.estimate.alpha import alpha_from_scores
    from specdec.reference.estimate.shares import merge

    place, ranks = config.placement, config.placement.ranks
    lengths = sorted(prompt_set.lengths[category])
    n_prompts, median = len(lengths), prompt_set.median_length(category)
    context = config.context or median + config.new_tokens // 2
    scored = merge(parts, n_prompts * config.samples_per_prompt)
    width = config.max_gamma(draft)
    est = alpha_from_scores(scored.scores[config.drafter], config.lenience, np.random.default_rng(config.seed),
                            config.bootstrap, max_gamma=width)
    report = {"kind": KIND_ESTIMATE, "drafter": config.drafter, "target": str(target.path), "backend": target.backend,
              "backend_seconds": target.backend_seconds, "note": note, "device": place.device,
              "device_map": getattr(target.model, "hf_device_map", None),
              "sampling": {"temperature": config.sampling.temperature, "top_k": config.sampling.top_k,
                           "top_p": config.sampling.top_p, "min_p": config.sampling.min_p},
              "category": category, "prompts": n_prompts, "samples_per_prompt": config.samples_per_prompt,
              "new_tokens": config.new_tokens, "prompt_tokens": median,
              "context": context, "generation_seconds": scored.generation_seconds,
              "scoring_seconds": scored.scoring_seconds, "alpha_seconds": alpha_seconds,
              "processes": {"count": ranks.world_size, "per_rank": scored.ranks,
                            "threads_per_process": torch.get_num_threads()},
              "seed": config.seed, **est.to_dict()}
    if report.get("confidence_law"):
        report["confidence_law"]["top_k"] = config.confidence_top_k
    warnings = _warnings(config, n_prompts)
    if all(s.accept() is not None for s in est.scores):
        report["replay"] = _replay(est, width)
    others = config.contexts if config.contexts is not None else _spanned(lengths, config, target.model)
    report.update(_costs(config, target, draft, scored.samples.sequences()[0], context, others, warnings))
    if config.batch_sizes is not None:
        report["batch_timing"] = _batch_timing(config, target.model, scored.samples.sequences()[0], context)
    report["warnings"] = warnings
    return report


def run_batch_timing(config: EstimateConfig) -> dict[str, Any] | None:
    """`--drafter none --batch-sizes ...`: t(B, k) on real text — the prompts named (`--prompts-file`,
    `--workload`), else held-out corpus text — nothing else (by rank 0 alone under torchrun:
    timings are not split); None on the other ranks."""
    from specdec.reference.model.models import load_model
    from specdec.reference.data.encoder_inputs import load_target_prompts
    from specdec.reference.data.prompts import held_out_prompts

    if not config.placement.ranks.main:
        return None
    target = load_model(config.target, config.placement.device, config.dtype, config.backend,
                        config.placement.device_map)
    context = config.context or DEFAULT_CONTEXT
    if config.source.file is not None or config.source.workloads:
        prompts = load_target_prompts(target, 4, config.source).ids
    else:
        prompts, _ = held_out_prompts(4, context + config.batch_max_k + max(config.batch_sizes), config.target)
    return {"kind": KIND_ESTIMATE, "target": str(target.path), "backend": target.backend,
            "batch_timing": _batch_timing(config, target.model, [t for prompt in prompts for t in prompt], context)}


def _warnings(config: EstimateConfig, n_prompts: int) -> list[str]:
    warnings, ranks = [], config.placement.ranks
    if n_prompts < FEW_PROMPTS:
        warnings.append(f"only {n_prompts} prompt(s): the 95% interval (bootstrap over prompts) is unreliable; "
                        f"use --tokens >= {FEW_PROMPTS} x --new-tokens")
    idle = ranks.idle(n_prompts, config.batch_size)
    if idle:
        warnings.append(f"{idle} of {ranks.world_size} processes had no prompts: {n_prompts} prompts make "
                        f"{math.ceil(n_prompts / config.batch_size)} batches of --batch-size {config.batch_size}; use "
                        "a smaller --batch-size")
    return warnings


def _replay(est, max_gamma: int) -> dict[str, Any]:
    """Tokens per iteration, acceptance and the law of the draft tokens verified per iteration by
    gamma ("proposed": P(k), k = 0.., what the pass costs: a chain's proposal length, a token
    tree's node count, which can pass max_k, the longest pass timed), replayed along the target's
    sequences (exact at T = 0, expected at T > 0; docs/estimator.md, "Replay")."""
    from specdec.reference.estimate.replay import replay

    out = {}
    for g in range(1, max_gamma + 1):
        stats, verified = replay([s.accept() for s in est.scores], [s.block for s in est.scores], g, max_gamma,
                                 [s.nodes for s in est.scores])
        out[str(g)] = {"tokens_per_iteration": stats.tokens_per_iteration(), "alpha": stats.alpha(),
                       "alpha_per_position": stats.alpha_per_position(),
                       "proposed": [float(x) / max(stats.iterations, 1e-12) for x in verified]}
    return out


def _spanned(lengths: list[int], config: EstimateConfig, model: torch.nn.Module) -> tuple[int, ...]:
    """The lengths a category's decoding spans: its shortest prompt and its longest prompt +
    new_tokens (at most the model's positions less max_k)."""
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    return tuple(sorted({min(lengths[0], limit - config.max_k), min(lengths[-1] + config.new_tokens,
                                                                     limit - config.max_k)}))


def _costs(config: EstimateConfig, target, draft, context_ids: list[int], context: int, others: tuple[int, ...],
           warnings: list[str]) -> dict[str, Any]:
    """c, c_hat, v(k), the loop overhead and the hardware's floor (or c_hat alone without timing),
    and t(1..max_k) at every length of `others` and `context` ("context_times")."""
    from specdec.reference.model.placement import output_device
    from specdec.reference.core.progress import phase
    from specdec.reference.estimate.cost import c_hat_for, estimate_cost
    from specdec.reference.estimate.limits import measure_limits
    from specdec.reference.measure.interference import DEFAULT_THRESHOLD, run_undisturbed

    if not config.timing:
        return {"c": None, "c_hat": c_hat_for(draft, target.model), "verify_cost": None, "cost": None}
    lengths = sorted({context, *others})
    phase(f"timing the target (t(k), k = 1..{config.max_k}, {config.timing_repeats} runs each at "
          f"{', '.join(map(str, lengths))} tokens of context), the drafter and the decode loop")
    (cost, timings), load, attempts = run_undisturbed(lambda: estimate_cost(
        target.model, draft, context_ids, config.sampling, context, config.max_k, config.timing_repeats,
        generator=torch.Generator(device=output_device(target.model)).manual_seed(config.seed),
        other_contexts=others), retries=3)
    if load > DEFAULT_THRESHOLD:
        warnings.append(f"other processes kept {load:.2f} CPU cores busy during the timings (after {attempts} "
                        "attempts): c and v(k) are inflated; rerun on a quiet machine")
    phase("measuring the hardware's floor (memory bandwidth, fp32 FLOP rate)")
    return {"timing_interference": {"threshold_cores": DEFAULT_THRESHOLD, "load_cores": load, "attempts": attempts,
                                    "disturbed": load > DEFAULT_THRESHOLD},
            "limits": measure_limits(target.model).to_dict(config.max_k),
            "c": cost.c, "c_hat": cost.c_hat, "verify_cost": cost.verify_cost, "cost": cost.to_dict(),
            "context_times": {"contexts": [t.context_tokens for t in timings], "seconds": [t.seconds for t in timings],
                              "spread": [t.spread for t in timings], "repeats": config.timing_repeats}}


def _batch_timing(config: EstimateConfig, model: torch.nn.Module, tokens: list[int], context: int
                  ) -> dict[str, Any]:
    from specdec.reference.core.progress import phase
    from specdec.reference.estimate.batch_timing import capturable, time_batched_passes, time_captured_passes

    captured = capturable(model)  # CUDA: the hardware's t(B, k), not Python's (docs/roofline.md)
    phase(f"timing t(B, k) for B = {','.join(map(str, config.batch_sizes))}, k = 1..{config.batch_max_k}"
          + (" (captured static decoder)" if captured else ""))
    if captured:
        return time_captured_passes(model, config.batch_sizes, context, config.batch_max_k).to_dict()
    return time_batched_passes(model, tokens, config.batch_sizes, context, config.batch_max_k,
                               config.timing_repeats).to_dict()
