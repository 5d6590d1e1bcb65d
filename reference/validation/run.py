"""Run a validation: estimate alpha and the costs, decode, and compare every configuration with
the simulator's predictions (docs/validation.md). `run_validation(job)` is the whole of
`specdec validate` (loading, the alpha part split over torchrun's processes, one validation
per prompt category); `validate` the experiment on models already loaded."""
from __future__ import annotations

import itertools
import platform
import time
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.reference.core.progress import phase
from specdec.reference.model.placement import output_device
from specdec.reference.core.seeds import derive_seed
from specdec.reference.distributed.ranks import Ranks
from specdec.reference.estimate.cost import CostEstimate, assemble_cost
from specdec.reference.measure.interference import run_undisturbed
from specdec.reference.estimate.timing import (TargetProbe, TargetTiming, pool_timings, time_draft_steps,
                                               time_step_overhead, time_target_passes)
from specdec.reference.validation.alphas import score_alpha_share, summarize_alphas
from specdec.reference.validation.config import ValidationConfig, ValidationJob
from specdec.reference.validation.dynamic import PolicyRow, policy_of, policy_row
from specdec.reference.validation.predict import plan_entry, predict_row, window_alpha
from specdec.reference.validation.rows import (NOTES, ValidationResult, ValidationRow, configuration_key,
                                               probe_range)
from specdec.reference.validation.suite import ValidationSuite
from specdec.reference.validation.runs import drafter_gammas, measure_decodes


def machine_info(device: torch.device, backend: str, backend_seconds: float = 0.0) -> dict[str, Any]:
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(device),
            "backend": backend, "backend_seconds": backend_seconds}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def run_validation(job: ValidationJob, progress: bool = True) -> ValidationSuite | None:
    """Load the target and the drafters (notes on stderr), estimate alpha (each torchrun process
    its share of the estimator's prompts, merged on rank 0), then time, decode and compare on
    rank 0, category by category of the job's prompts (each timed at its own context length).
    Returns the suite on rank 0, None on the other ranks."""
    from specdec.reference.model.models import load_model
    from specdec.reference.data.encoder_inputs import load_target_prompts
    from specdec.reference.distributed.collect import gather_shares
    from specdec.reference.distributed.ranks import process_group
    from specdec.reference.drafters.factory import make_drafter

    config, place = job.config, job.placement
    ranks = place.ranks

    def work():  # every rank: load (kept here), then the alpha part for its share of each category's prompts
        target = load_model(job.target, place.device, job.dtype, job.backend, place.device_map)
        built = {}
        for label, spec in job.drafters.items():
            drafter, note = make_drafter(spec, target, place.device, job.dtype, place.draft_device_map)
            if note:
                phase(f"note ({label}): {note}", ranks.main)
            built[label] = drafter
        prompt_set = load_target_prompts(target, max(config.prompts, config.alpha_prompts),
                                     job.source)
        if not ranks.parallel:
            return (target, built, prompt_set), None  # one process: `validate` estimates alpha itself
        shares = {}
        for category in prompt_set.category_names():
            alpha_ids = prompt_set.of(category)[:config.alpha_prompts]
            shares[category] = score_alpha_share(target, built, alpha_ids, ranks.share(len(alpha_ids),
                                                 config.batch_size), category_config(config, prompt_set, category),
                                                 progress=ranks.main)
        return (target, built, prompt_set), shares

    start = time.perf_counter()
    with process_group(ranks, place.device):
        gathered = gather_shares(ranks, work)
    if gathered is None:  # not rank 0: its share is with rank 0, which times, decodes and writes
        return None
    (target, built, prompt_set), shares = gathered
    results = {}
    try:
        for category in prompt_set.category_names():
            ids, cfg = prompt_set.of(category), category_config(config, prompt_set, category)
            alpha_part = None
            if ranks.parallel:
                alphas, samples = summarize_alphas([share[category] for share in shares],
                                                   len(ids[:config.alpha_prompts]), list(built), cfg)
                alpha_part = (alphas, samples, time.perf_counter() - start)
            if len(prompt_set.category_names()) > 1:
                phase(f"category {category}: {len(ids)} prompts, median {cfg.prompt_tokens} tokens", progress)
            result = validate(target, built, ids[:config.prompts], ids[:config.alpha_prompts], cfg, progress,
                              alpha_part)
            result.machine["processes"] = ranks.world_size
            result.target, result.drafters, result.category = str(target.path), dict(job.drafters), category
            results[category] = result
            start = time.perf_counter()
    finally:
        for drafter in built.values():
            drafter.close()
    return ValidationSuite(results, prompt_set.describe())


def category_config(config: ValidationConfig, prompt_set, category: str) -> ValidationConfig:
    """The config of one category: its prompts' median length stands for prompt_tokens, so the
    costs are timed at the contexts its decodes run at (`ValidationConfig.sweep_contexts`)."""
    return replace(config, prompt_tokens=prompt_set.median_length(category))


def validate(target, drafters: dict[str, Any], prompts: Sequence[Sequence[int]],
             alpha_prompts: Sequence[Sequence[int]], config: ValidationConfig,
             progress: bool = False, alpha_part: tuple[dict, dict, float] | None = None) -> ValidationResult:
    """Estimate, decode and compare for every drafter, gamma and temperature.

    target: a `specdec.reference.model.models.LoadedModel` (model + vocab_size); drafters: name -> drafter
    object; prompts: the decode prompts; alpha_prompts: the estimator's prompts. alpha_part:
    (alphas, samples per temperature, seconds) already estimated (by several processes:
    specdec.reference.validation.alphas); None estimates them here, in this process.
    """
    if not drafters:
        raise SpecdecError("validation needs at least one drafter")
    trees = [name for name, drafter in drafters.items() if drafter.tree]
    if trees:
        raise SpecdecError(f"{trees[0]} proposes token trees: the validation estimates one draft a pass (measure "
                           "trees with `specdec heads lattice` and `specdec decode --baseline`)")
    model = target.model
    device = output_device(model)
    if alpha_part is None:
        start = time.perf_counter()
        chunks = Ranks().share(len(alpha_prompts), config.batch_size)  # all of them: one process
        share = score_alpha_share(target, drafters, alpha_prompts, chunks, config, progress)
        alphas, samples_at = summarize_alphas([share], len(alpha_prompts), list(drafters), config)
        alpha_part = (alphas, samples_at, time.perf_counter() - start)
    alphas, samples_at, alpha_seconds = alpha_part
    rng = np.random.default_rng(config.seed)
    seconds: dict[str, float] = {"alpha": alpha_seconds, "cost": 0.0, "decode": 0.0}
    costs: dict[tuple[str, float], CostEstimate] = {}
    rows: list[ValidationRow] = []
    plans: list[dict[str, Any]] = []
    timing: TargetTiming | None = None
    all_sweeps: list[TargetTiming] = []
    interference: dict[str, dict[str, Any]] = {}
    gamma_top = max(config.gammas)
    # a rule's iterations make 1..n_max draft forwards: c is timed at each count (`policy_row`)
    policy_tops = {k for p in config.policies for k in range(1, policy_of(p, gamma_top).k_max + 1)}
    policy_rows: list[PolicyRow] = []
    for ti, temperature in enumerate(config.temperatures):
        sampling = config.sampling(temperature)
        samples = samples_at[temperature]
        start = time.perf_counter()
        phase(f"timing the target, the loop overhead and the drafters (T={temperature:g})", progress)
        context = samples.sequences()[0]
        retry = dict(retries=config.retries, threshold=config.interference_threshold)
        if timing is None:
            timing = run_undisturbed(lambda: time_target_passes(model, context, config.context, config.max_k,
                                                                config.timing_repeats), **retry)[0]
        overhead = run_undisturbed(lambda: time_step_overhead(model, context, config.context, sampling, config.max_k,
                                                              generator=torch.Generator(device=device).manual_seed(0)),
                                   **retry)[0]
        # each gamma decoded is timed at that gamma: a drafter's fixed cost per iteration (the commit,
        # the first step from cold caches) spread over gamma_top tokens understated short drafts
        drafts = {(name, g): run_undisturbed(lambda d=drafter, g=g: time_draft_steps(
            d, model, context, sampling, config.context, g, config.draft_repeats,
            generator=torch.Generator(device=device).manual_seed(0)), **retry)[0]
            for name, drafter in drafters.items() for g in {gamma_top, *drafter_gammas(drafter, config.gammas),
                                                             *policy_tops}}
        seconds["cost"] += time.perf_counter() - start
        start = time.perf_counter()

        # cycled: a sweep redone for foreign load takes the next context (a fixed-length list ran out
        # on a loaded machine: StopIteration from the main job)
        sweep_contexts = itertools.cycle(config.sweep_contexts())

        def sweep() -> TargetTiming:  # t(k) for the k's the decodes use, between decode blocks
            return time_target_passes(model, context, next(sweep_contexts), gamma_top + 1, config.sweep_repeats, 1)

        probe = TargetProbe(model, context, config.context) if config.probe else None
        runs, sweeps = measure_decodes(model, drafters, prompts, config.gammas, sampling, config.new_tokens,
                                       config.repeats, derive_seed(config.seed, ti, 3), progress,
                                       sweep if config.sweep_repeats else None, probe=probe,
                                       policies=config.policies, **retry)
        for (name, g), entry in runs.items():
            interference[configuration_key(temperature, name, g)] = {
                "runs": len(entry), "attempts": sum(r.attempts for r in entry),
                "max_load": max((r.load for r in entry), default=0.0),
                "still_disturbed": sum(r.load > config.interference_threshold for r in entry),
                "probe_seconds": probe_range([r.step_seconds for r in entry])}
        seconds["decode"] += time.perf_counter() - start
        pooled = pool_timings([timing, *sweeps])  # this temperature's v(k): up-front and in-between runs
        all_sweeps.extend(sweeps)
        for name, drafter in drafters.items():
            cost = assemble_cost(drafter, model, pooled, drafts[(name, gamma_top)], overhead)
            costs[(name, temperature)], alpha = cost, alphas[(name, temperature)]
            plans.append(plan_entry(name, temperature, alpha, cost, config.max_k - 1))
            window = window_alpha(alpha, config.new_tokens, drafter.deterministic, rng)
            for g in drafter_gammas(drafter, config.gammas):
                at_g = assemble_cost(drafter, model, pooled, drafts[(name, g)], overhead)
                rows.append(predict_row(name, temperature, g, alpha, at_g, runs[(name, g)],
                                        runs[("baseline", 0)], window, rng))
            for spelling in config.policies:
                policy = policy_of(spelling, gamma_top)
                at_n = assemble_cost(drafter, model, pooled, drafts[(name, policy.k_max)], overhead)
                by_forwards = [drafts[(name, k)].c for k in range(1, policy.k_max + 1)]
                row = policy_row(name, temperature, spelling, policy, alpha, at_n, by_forwards,
                                 runs[(name, spelling)], runs[("baseline", 0)], rng)
                if row is not None:
                    policy_rows.append(row)
    pooled = pool_timings([timing, *all_sweeps]) if timing is not None else None
    return ValidationResult(config, rows, alphas, costs, plans, pooled, seconds,
                            machine_info(device, target.backend, target.backend_seconds), dict(NOTES), interference,
                            policy_rows=policy_rows)
