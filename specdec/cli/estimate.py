"""`specdec estimate`: alpha (Corollary 3.6) and the costs c, c_hat, v(k) of one drafter.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `c` draft/target step
time ratio, `c_hat` arithmetic ratio, v(k) the verify-cost curve, `l` the lenience.

Thin: parse the options, call specdec.reference.estimate.alpha / specdec.reference.estimate.cost, print a
summary or one JSON object. torch is imported only when the command runs.
"""
from __future__ import annotations

import math

import click

from specdec.cli.common import (MAX_GAMMA, backend_option, check_context, drafter_option, generator, in_range,
                                json_option, load_prompts, model_options, parse_floats, parse_lenience, positive,
                                preflight_target, prompts_file_option, refuse_tree_drafter, require_drafter, sampling_options,
                                seed_option, to_json)
from specdec.cli.placement import device_map_options, resolve_placement

MAX_BATCH = 256  # largest batch size --batch-sizes times
FEW_PROMPTS = 10  # below this many prompts the bootstrap interval over prompts is flagged as unreliable


def _batch_sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    """"1,2,4,8" -> (1, 2, 4, 8): strictly increasing integers in [1, MAX_BATCH]."""
    numbers = parse_floats(ctx, param, value)
    if numbers is None:
        return None
    if any(b != int(b) for b in numbers) or min(numbers) < 1 or max(numbers) > MAX_BATCH \
            or list(numbers) != sorted(set(numbers)):
        raise click.BadParameter(f"batch sizes must be strictly increasing integers in [1, {MAX_BATCH}], got {value!r}",
                                 ctx=ctx, param=param)
    return tuple(int(b) for b in numbers)


@click.command()
@model_options
@device_map_options
@backend_option
@drafter_option
@click.option("--tokens", type=int, default=10_000, show_default=True, callback=positive,
              help="Target-sampled positions to score: ceil(tokens / new-tokens) prompts.")
@click.option("--new-tokens", type=int, default=128, show_default=True, callback=positive,
              help="Tokens the target samples after each prompt.")
@click.option("--prompt-tokens", type=int, default=64, show_default=True, callback=positive,
              help="Prompt length in tokens (held-out Shakespeare/Austen chunks, or cut from --prompts-file).")
@prompts_file_option
@sampling_options
@click.option("--lenience", default="1,0.5,0.3,0.1", show_default=True, callback=parse_lenience,
              help="Lenience values l in (0, 1] (App. A.5): alpha = E sum min(p/l, q).")
@click.option("--batch-size", type=int, default=16, show_default=True, callback=positive,
              help="Prompts per batched generation (the unit of work a process takes under torchrun); "
                   "teacher-forced passes take up to 8 of them.")
@click.option("--bootstrap", type=int, default=2000, show_default=True, callback=positive,
              help="Bootstrap resamples (over prompts) for the 95% interval.")
@click.option("--context", type=int, default=128, show_default=True, callback=positive,
              help="KV-cache length (tokens) at which the steps are timed.")
@click.option("--max-k", type=int, default=16, show_default=True, callback=in_range(2, MAX_GAMMA + 1),
              help=f"Verify-cost curve v(1..max_k), 2 .. {MAX_GAMMA + 1}.")
@click.option("--timing-repeats", type=int, default=7, show_default=True, callback=positive,
              help="Timed runs of each k (the median is kept).")
@click.option("--no-timing", is_flag=True, help="Skip the timings (alpha only; c, v(k) are null).")
@click.option("--batch-sizes", default=None, callback=_batch_sizes, metavar="B1,B2,...",
              help="Also time t(B, k): one pass over B sequences x k new tokens, k = 1..--batch-max-k, for the "
                   "batch-aware plan (`specdec plan --from ... --batch-cost-file`). With --drafter none: only this.")
@click.option("--batch-max-k", type=int, default=8, show_default=True, callback=in_range(2, MAX_GAMMA + 1),
              help="Largest k of t(B, k).")
@seed_option
@json_option
def estimate(target_path, device, dtype, device_map, draft_device_map, backend, drafter, tokens, new_tokens,
             prompt_tokens, prompts_file, temperature, top_k, top_p, lenience, batch_size, bootstrap, context, max_k,
             timing_repeats, no_timing, batch_sizes, batch_max_k, seed, as_json):
    """Estimate alpha of a drafter against the target, its 95% interval, and the costs c, c_hat, v(k);
    with --batch-sizes also t(B, k) per batch size.

    Under `torchrun --nproc-per-node N -m specdec estimate ...` the prompts are split over the N
    processes and alpha is the same as one process gives; rank 0 alone times and prints
    (docs/distributed.md)."""
    import time

    import numpy as np
    import torch

    from specdec.reference.core.models import load_model
    from specdec.reference.core.placement import output_device
    from specdec.reference.core.progress import phase
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.distributed.collect import gather_on_main
    from specdec.reference.distributed.ranks import process_group
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.estimate.alpha import alpha_from_scores
    from specdec.reference.estimate.cost import estimate_cost
    from specdec.reference.estimate.interference import DEFAULT_THRESHOLD, run_undisturbed
    from specdec.reference.estimate.limits import measure_limits
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.shares import merge, score_chunks

    if batch_sizes is not None:
        if drafter == "none":
            return _batch_only(target_path, device, dtype, device_map, backend, batch_sizes, batch_max_k, context,
                               timing_repeats, as_json)
    require_drafter(drafter, "estimating alpha needs a drafter (not 'none'; with --batch-sizes, 'none' times t(B, k) "
                             "only)")
    refuse_tree_drafter(drafter, "a heads lattice has no single-draft alpha: measure it with `specdec heads lattice`")
    path, limit = preflight_target(target_path)
    check_context(limit, prompt_tokens + new_tokens, "--prompt-tokens plus --new-tokens", "--new-tokens")
    if not no_timing:
        check_context(limit, context + max_k, "--context plus --max-k", "--context")
    place = resolve_placement(device, device_map, draft_device_map, backend, path, (drafter,))
    ranks = place.ranks
    sampling = SamplingConfig(temperature, top_k, top_p)
    max_gamma = min(max_k - 1, 8)
    loaded: dict = {}

    def work():  # this rank's share: load, sample and score its chunks of prompts
        target = load_model(path, place.device, dtype, backend, place.device_map)
        draft, note = make_drafter(drafter, target, place.device, dtype, place.draft_device_map)
        prompts, sources = load_prompts(target, math.ceil(tokens / new_tokens), prompt_tokens, prompts_file)
        loaded.update(target=target, draft=draft, note=note, n_prompts=len(prompts))
        return score_chunks(target.model, {drafter: draft}, prompts, ranks.share(len(prompts), batch_size),
                            new_tokens, sampling, seed, target.vocab_size, lenience, min(batch_size, 8), max_gamma,
                            generator=generator(output_device(target.model), seed), progress=ranks.main,
                            sources=sources)

    start = time.perf_counter()
    with process_group(ranks, place.device):
        parts = gather_on_main(ranks, work)
    if parts is None:  # not rank 0: its share is with rank 0
        return
    alpha_seconds = time.perf_counter() - start
    target, draft, note, n_prompts = loaded["target"], loaded["draft"], loaded["note"], loaded["n_prompts"]
    scored = merge(parts, n_prompts)
    samples = scored.samples
    warnings = []
    if n_prompts < FEW_PROMPTS:
        warnings.append(f"only {n_prompts} prompt(s): the 95% interval (bootstrap over prompts) is unreliable; "
                        f"use --tokens >= {FEW_PROMPTS} x --new-tokens")
    if ranks.idle(n_prompts, batch_size):
        warnings.append(f"{ranks.idle(n_prompts, batch_size)} of {ranks.world_size} processes had no prompts: "
                        f"{n_prompts} prompts make {math.ceil(n_prompts / batch_size)} batches of --batch-size "
                        f"{batch_size}; use a smaller --batch-size")
    est = alpha_from_scores(scored.scores[drafter], lenience, np.random.default_rng(seed), bootstrap,
                            max_gamma=max_gamma)
    report = {"drafter": drafter, "target": str(target.path), "backend": target.backend,
              "backend_seconds": target.backend_seconds, "note": note,
              "device": place.device, "device_map": getattr(target.model, "hf_device_map", None),
              "sampling": {"temperature": temperature, "top_k": top_k, "top_p": top_p},
              "prompts": n_prompts, "new_tokens": new_tokens, "prompt_tokens": prompt_tokens,
              "generation_seconds": scored.generation_seconds, "scoring_seconds": scored.scoring_seconds,
              "alpha_seconds": alpha_seconds,
              "processes": {"count": ranks.world_size, "per_rank": scored.ranks,
                            "threads_per_process": torch.get_num_threads()},
              "seed": seed, **est.to_dict()}
    if all(s.match is not None for s in est.scores):
        report["greedy_replay"] = {}
        for g in range(1, max_gamma + 1):
            stats, _ = replay([s.match for s in est.scores], [s.block for s in est.scores], g, max_gamma)
            report["greedy_replay"][str(g)] = {"tokens_per_iteration": stats.tokens_per_iteration(),
                                               "alpha": stats.alpha(),
                                               "alpha_per_position": stats.alpha_per_position()}
    cost = None
    if not no_timing:
        context_ids = samples.sequences()[0]
        phase(f"timing the target (t(k), k = 1..{max_k}, {timing_repeats} runs each at {context} tokens of "
              "context), the drafter and the decode loop")
        cost, load, attempts = run_undisturbed(lambda: estimate_cost(
            target.model, draft, context_ids, sampling, context, max_k, timing_repeats,
            generator=generator(output_device(target.model), seed)), retries=3)
        report["timing_interference"] = {"threshold_cores": DEFAULT_THRESHOLD, "load_cores": load,
                                         "attempts": attempts, "disturbed": load > DEFAULT_THRESHOLD}
        if load > DEFAULT_THRESHOLD:
            warnings.append(f"other processes kept {load:.2f} CPU cores busy during the timings (after {attempts} "
                            "attempts): c and v(k) are inflated; rerun on a quiet machine")
        phase("measuring the hardware's floor (memory bandwidth, fp32 FLOP rate)")
        report["limits"] = measure_limits(target.model).to_dict(max_k)
    if batch_sizes is not None:
        from specdec.reference.estimate.batch_timing import time_batched_passes
        check_context(limit, context + batch_max_k + max(batch_sizes), "--context plus --batch-max-k", "--context")
        phase(f"timing t(B, k) for B = {','.join(map(str, batch_sizes))}, k = 1..{batch_max_k}")
        report["batch_timing"] = time_batched_passes(target.model, samples.sequences()[0], batch_sizes, context,
                                                     batch_max_k, timing_repeats).to_dict()
    report.update({"c": None if cost is None else cost.c,
                   "c_hat": None if cost is None else cost.c_hat,
                   "verify_cost": None if cost is None else cost.verify_cost,
                   "cost": None if cost is None else cost.to_dict()})
    if cost is None:
        from specdec.reference.estimate.cost import c_hat_for
        report["c_hat"] = c_hat_for(draft, target.model)
    report["warnings"] = warnings
    if as_json:
        click.echo(to_json(report))
        return
    _print(report, note)


def _print(r: dict, note: str | None) -> None:
    if note:
        click.echo(f"note: {note}", err=True)
    for warning in r["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    s = r["sampling"]
    click.echo(f"drafter {r['drafter']}  temperature {s['temperature']:g}  top-k {s['top_k']}  top-p {s['top_p']:g}")
    click.echo(f"positions {r['n_positions']} ({r['prompts']} prompts x {r['new_tokens']} target-sampled tokens)")
    procs = r["processes"]
    if procs["count"] > 1:
        click.echo(f"processes {procs['count']} (prompts per rank "
                   + ",".join(str(p["prompts"]) for p in procs["per_rank"])
                   + f"; {procs['threads_per_process']} threads each); alpha part {r['alpha_seconds']:.1f} s")
    low, high = r["alpha_ci"]
    click.echo(f"alpha {_f(r['alpha'], '.4f')}  95% CI [{_f(low, '.4f')}, {_f(high, '.4f')}] (bootstrap over prompts)")
    if r["proposal_rate"] < 1:
        click.echo(f"proposal rate {_f(r['proposal_rate'], '.3f')}  "
                   f"alpha when proposed {_f(r['alpha_when_proposed'], '.4f')} (positions without a proposal count as rejections in alpha)")
    if r.get("alpha_per_position"):
        click.echo("alpha per draft position (heads; alpha_i = P(draft i kept | drafts before it kept)) "
                   + "  ".join(f"{i}: {_f(a, '.4f')} [{_f(lo, '.3f')}, {_f(hi, '.3f')}]" for i, (a, (lo, hi))
                               in enumerate(zip(r["alpha_per_position"], r["alpha_per_position_ci"]), 1)))
        if r["c"] is not None:
            click.echo("  plan them: specdec plan --alpha-per-position "
                       + ",".join(f"{a:.4f}" for a in r["alpha_per_position"]) + f" --c {r['c']:.5f} "
                       f"--max-gamma {len(r['alpha_per_position'])} --verify-cost "
                       + ",".join(f"{v:.3f}" for v in r["verify_cost"][:len(r["alpha_per_position"]) + 1]))
    q = r["beta_quantiles"]
    click.echo("beta quantiles " + "  ".join(f"{k} {_f(v, '.3f')}" for k, v in q.items()))
    click.echo("alpha with lenience " + "  ".join(f"l={k}: {_f(v, '.4f')}" for k, v in r["alpha_lenience"].items()))
    if r.get("alpha_lenient_argmax"):
        click.echo("  argmax rule (p(x) >= l max p, T=0 variant of App. A.5, not in the decoder) "
                   + "  ".join(f"l={k}: {_f(v, '.4f')}" for k, v in r["alpha_lenient_argmax"].items()))
    if r.get("greedy_replay"):
        click.echo("greedy replay (exact at T=0): tokens/iteration by gamma "
                   + "  ".join(f"{g}: {_f(v['tokens_per_iteration'], '.3f')}" for g, v in r["greedy_replay"].items()))
    click.echo(f"what: {r['estimates']}")
    if r["c"] is not None:
        cost, limits = r["cost"], r["limits"]
        click.echo(f"c {_f(r['c'], '.5f')}  c_hat {_f(r['c_hat'], '.3g')}  draft "
                   f"{_f(1000 * cost['draft_token_seconds'], '.3f')} ms/token  (backend {r['backend']}, set up in "
                   f"{r['backend_seconds']:.1f} s, "
                   f"{cost['context_tokens']} tokens of context)")
        click.echo("k         " + " ".join(f"{k:>6d}" for k in range(1, len(r["verify_cost"]) + 1)))
        click.echo("t(k) ms   " + " ".join(f"{1000 * s:6.1f}" for s in cost["verify_seconds"]))
        click.echo("v(k)      " + " ".join(f"{_f(v, '6.2f')}" for v in r["verify_cost"]))
        click.echo("floor ms  " + " ".join(f"{1000 * s:6.1f}" for s in limits["min_seconds"]))
        click.echo(f"floor: {limits['weight_bytes'] / 1e6:.0f} MB of weights at {limits['bandwidth'] / 1e9:.1f} GB/s "
                   f"(STREAM triad), {limits['matrix_flops_per_token'] / 1e6:.0f} MFLOP per token at "
                   f"{limits['flops'] / 1e9:.0f} GFLOP/s; t(1) is {cost['verify_seconds'][0] / limits['min_seconds'][0]:.1f}x "
                   "the floor")
        o = cost["overhead"]
        click.echo(f"loop overhead o(0) {_f(o[0], '.4f')}  o(4) {_f(o[min(4, len(o) - 1)], '.4f')} target steps")
    if r.get("batch_timing"):
        _print_batch(r["batch_timing"])


def _batch_only(target_path, device, dtype, device_map, backend, batch_sizes, max_k, context, repeats,
                as_json) -> None:
    """`--drafter none --batch-sizes ...`: t(B, k) on real held-out text, nothing else (by rank 0
    alone under torchrun: timings are not split)."""
    from specdec.reference.core.models import load_model
    from specdec.reference.core.progress import phase
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.estimate.batch_timing import time_batched_passes

    path, limit = preflight_target(target_path)
    check_context(limit, context + max_k + max(batch_sizes), "--context plus --batch-max-k", "--context")
    place = resolve_placement(device, device_map, None, backend, path)
    if not place.ranks.main:
        return
    target = load_model(path, place.device, dtype, backend, place.device_map)
    prompts, _ = held_out_prompts(4, context + max_k + max(batch_sizes), path)
    phase(f"timing t(B, k) for B = {','.join(map(str, batch_sizes))}, k = 1..{max_k}")
    timing = time_batched_passes(target.model, [t for p in prompts for t in p], batch_sizes, context, max_k, repeats)
    report = {"target": str(target.path), "backend": target.backend, "batch_timing": timing.to_dict()}
    if as_json:
        click.echo(to_json(report))
        return
    _print_batch(report["batch_timing"])


def _print_batch(bt: dict) -> None:
    click.echo(f"t(B, k) in ms ({bt['context_tokens']} tokens of context, {bt['device']}, {bt['threads']} threads; "
               "one pass over B sequences x k tokens):")
    click.echo("B \\ k " + " ".join(f"{k:>7d}" for k in range(1, len(bt["seconds"][0]) + 1)))
    for b, row in zip(bt["batch_sizes"], bt["seconds"]):
        click.echo(f"{b:>5d} " + " ".join(f"{1000 * s:7.2f}" for s in row))


def _f(value: float | None, spec: str) -> str:
    """A number for the text report; undefined values (None, NaN) read "n/a"."""
    return "n/a" if value is None or value != value else format(value, spec)
