"""`specdec estimate`: alpha (Corollary 3.6) and the costs c, c_hat, v(k) of one drafter.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `c` draft/target step
time ratio, `c_hat` arithmetic ratio, v(k) the verify-cost curve, `l` the lenience.

Thin: parse and check the options, call `specdec.reference.estimate.run.run_estimate`, print a
summary or one JSON object. torch is imported only when the command runs.
"""
from __future__ import annotations

import math

import click

from specdec.cli.common import (LENIENCE, MAX_BOOTSTRAP, MAX_DECODE_GAMMA, MAX_REPEATS, MAX_TOKENS, backend_option,
                                check_context, check_drafter_kinds, check_heads_prompts, drafter_option, json_option,
                                model_options, preflight_prompts, preflight_target, prompt_source,
                                prompt_source_options, require_drafter, sampling_options,
                                seed_option)
from specdec.cli.placement import device_map_options, resolve_placement
from specdec.cli.types import POSITIVE, Number, NumberList
from specdec.errors import SpecdecError
from specdec.reference.distributed.launch import MAX_PROCESSES
from specdec.strict_json import to_json

MAX_BATCH = 256  # largest batch size --batch-sizes times


@click.command()
@model_options
@device_map_options
@backend_option
@drafter_option
@click.option("--tokens", type=Number(int, 1, MAX_TOKENS), default=10_000, show_default=True,
              help="Target-sampled positions to score per prompt category: ceil(tokens / new-tokens / "
                   "samples-per-prompt) prompts.")
@click.option("--samples-per-prompt", type=Number(int, 1, 1024), default=1, show_default=True,
              help="Continuations sampled from each prompt (T > 0), each with its own generator: a short prompt list "
                   "averaged over more of its sample paths (the bootstrap then resamples continuations).")
@click.option("--new-tokens", type=POSITIVE, default=128, show_default=True,
              help="Tokens the target samples after each prompt.")
@click.option("--prompt-tokens", type=POSITIVE, default=64, show_default=True,
              help="Length of the held-out corpus prompts (the continue workload), in tokens.")
@prompt_source_options
@sampling_options
@click.option("--lenience", default="1,0.5,0.3,0.1", show_default=True, type=LENIENCE,
              help="Lenience values l in (0, 1] (App. A.5): alpha = E sum min(p/l, q).")
@click.option("--batch-size", type=POSITIVE, default=16, show_default=True,
              help="Prompts per batched generation (the unit of work a process takes under torchrun); "
                   "teacher-forced passes take up to 8 of them.")
@click.option("--bootstrap", type=Number(int, 1, MAX_BOOTSTRAP), default=2000, show_default=True,
              help="Bootstrap resamples (over prompts) for the 95% interval.")
@click.option("--context", type=POSITIVE, default=None,
              help="KV-cache length (tokens) at which the steps are timed [default: each category's median prompt "
                   "length + half of --new-tokens; 128 for --drafter none].")
@click.option("--contexts", type=NumberList(int, 1, 1 << 20, increasing=True, what="context lengths"), default=None,
              metavar="L1,L2,...",
              help="Also time t(1..max-k) at these KV-cache lengths, for `specdec plan --context` (interpolated "
                   "between timed lengths) [default: each category's shortest prompt and longest prompt + "
                   "--new-tokens].")
@click.option("--max-k", type=Number(int, 2, MAX_DECODE_GAMMA + 1), default=16, show_default=True,
              help=f"Verify-cost curve v(1..max_k), 2 .. {MAX_DECODE_GAMMA + 1}.")
@click.option("--timing-repeats", type=Number(int, 1, MAX_REPEATS), default=7, show_default=True,
              help="Timed runs of each k (the median is kept).")
@click.option("--no-timing", is_flag=True, help="Skip the timings (alpha only; c, v(k) are null).")
@click.option("--batch-sizes", default=None, metavar="B1,B2,...",
              type=NumberList(int, 1, MAX_BATCH, increasing=True, what="batch sizes"),
              help="Also time t(B, k): one pass over B sequences x k new tokens, k = 1..--batch-max-k, for the "
                   "batch-aware plan (`specdec plan --from ... --batch-cost-file`). With --drafter none: only this.")
@click.option("--batch-max-k", type=Number(int, 2, MAX_DECODE_GAMMA + 1), default=8, show_default=True,
              help="Largest k of t(B, k).")
@click.option("--processes", type=Number(int, 1, MAX_PROCESSES), default=1, show_default=True,
              help="Split the prompts over this many processes on this machine (launched through torchrun's API "
                   "once the options are checked; the same alpha as one process, docs/distributed.md).")
@click.option("--confidence-top-k", type=Number(int, 0, 1 << 20), default=0, show_default=True,
              help="The confidence law's draft confidence: the top probability renormalised over the draft's k most "
                   "likely tokens, as an engine's cut-off reads it (llama.cpp's --spec-draft-p-min: 10); 0: over "
                   "all of them. model: and ngram: drafters.")
@seed_option
@json_option
def estimate(target_path, device, dtype, device_map, draft_device_map, backend, drafter, tokens, new_tokens,
             prompt_tokens, prompts_file, encoder_inputs, workloads, categories, chat_template, max_prompt_tokens, truncate, temperature, top_k, top_p, min_p, lenience, batch_size, bootstrap, context, contexts, max_k,
             timing_repeats, no_timing, batch_sizes, batch_max_k, processes, confidence_top_k, seed, samples_per_prompt, as_json):
    """Estimate alpha of a drafter against the target, its 95% interval, and the costs c, c_hat, v(k);
    with --batch-sizes also t(B, k) per batch size.

    Under `torchrun --nproc-per-node N -m specdec estimate ...` the prompts are split over the N
    processes and alpha is the same as one process gives; rank 0 alone times and prints
    (docs/distributed.md)."""
    batch_only = batch_sizes is not None and drafter == "none"
    if samples_per_prompt > 1 and temperature == 0:
        raise click.BadParameter("at --temperature 0 every continuation of a prompt is the same: use 1",
                                 param_hint="--samples-per-prompt")
    # the prompts' files checked before the tokenizer loads; t(B, k) alone runs on the prompts named, else held-out text
    source = prompt_source(prompts_file, workloads, categories, chat_template, max_prompt_tokens, truncate,
                           prompt_tokens, encoder_inputs)
    path, limit = preflight_target(target_path)
    check_drafter_kinds(path, (drafter,))
    if confidence_top_k and drafter.partition(":")[0] not in ("model", "ngram"):
        raise click.BadParameter(f"{drafter.partition(':')[0]!r} drafters report no confidence to renormalise "
                                 "(model: and ngram: do)", param_hint="--confidence-top-k")
    from specdec.reference.core.sampling import SamplingConfig  # torch, once the prompts and the target are checked
    from specdec.reference.estimate.run import DEFAULT_CONTEXT, EstimateConfig, run_batch_timing, run_estimate

    if batch_sizes is not None:
        from specdec.reference.model.model_files import require_causal
        try:
            require_causal(path, "timing t(B, k)")
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint="--batch-sizes") from None
    if contexts and (no_timing or batch_only):
        raise click.UsageError("--contexts times the verify-cost curve: it needs the timings (not --no-timing, "
                               "not --drafter none)")
    if not batch_only:
        require_drafter(drafter, "estimating alpha needs a drafter (not 'none'; with --batch-sizes, 'none' times "
                                 "t(B, k) only)")
        check_heads_prompts(drafter, prompt_tokens)
        longest = preflight_prompts(path, math.ceil(tokens / new_tokens / samples_per_prompt), source).longest
        check_context(limit, longest + new_tokens, "the longest prompt plus --new-tokens", "--new-tokens")
        if not no_timing:
            check_context(limit, (context or longest + new_tokens // 2) + max_k, "the timing context plus --max-k",
                          "--context")
            if contexts:
                check_context(limit, contexts[-1] + max_k, "the longest of --contexts plus --max-k", "--contexts")
    else:
        longest = 0
    if batch_sizes is not None:
        timed_at = context or (DEFAULT_CONTEXT if batch_only else longest + new_tokens // 2)
        check_context(limit, timed_at + batch_max_k + max(batch_sizes), "--context plus --batch-max-k", "--context")
    place = resolve_placement(device, device_map, None if batch_only else draft_device_map, backend, path,
                              () if batch_only else (drafter,))
    if processes > 1:  # every option checked: the ranks run this same command line
        from specdec.cli import ARGV
        from specdec.reference.distributed.launch import launch, without_option

        launch(processes, without_option(ARGV, "--processes"))
        return
    config = EstimateConfig(target=path, drafter=drafter, placement=place, dtype=dtype, backend=backend,
                            sampling=SamplingConfig(temperature, top_k, top_p, min_p), tokens=tokens, new_tokens=new_tokens,
                            source=source, lenience=lenience,
                            batch_size=batch_size, bootstrap=bootstrap, context=context, contexts=contexts, max_k=max_k,
                            timing_repeats=timing_repeats, timing=not no_timing, batch_sizes=batch_sizes,
                            batch_max_k=batch_max_k, seed=seed, samples_per_prompt=samples_per_prompt,
                            confidence_top_k=confidence_top_k)
    report = run_batch_timing(config) if batch_only else run_estimate(config)
    if report is None:  # a torchrun rank other than 0: rank 0 prints
        return
    if as_json:
        click.echo(to_json(report))
    elif batch_only:
        _print_batch(report["batch_timing"])
    elif "categories" in report:
        _print_categories(report)
    else:
        _print(report, report["note"])


def _print_categories(report: dict) -> None:
    """Per category: alpha with its interval, t(1) and v(2) at the category's context; then each
    category's full summary."""
    if report["note"]:
        click.echo(f"note: {report['note']}", err=True)
    click.echo("| category | prompts | median prompt tokens | alpha | 95% CI | context | t(1) ms | v(2) | v(max) |")
    click.echo("|---|---|---|---|---|---|---|---|---|")
    for category, r in report["categories"].items():
        low, high = r["alpha_ci"]
        timed = r["c"] is not None
        click.echo(f"| {category} | {r['prompts']} | {r['prompt_tokens']} | {_f(r['alpha'], '.4f')} | "
                   f"[{_f(low, '.4f')}, {_f(high, '.4f')}] | {r['context']} | "
                   + (f"{1000 * r['cost']['verify_seconds'][0]:.1f} | {r['verify_cost'][1]:.2f} | "
                      f"{r['verify_cost'][-1]:.2f} |" if timed else "n/a | n/a | n/a |"))
    for category, r in report["categories"].items():
        click.echo(f"\n# {category}")
        _print({**r, "note": None}, None)


def _print(r: dict, note: str | None) -> None:
    if note:
        click.echo(f"note: {note}", err=True)
    for warning in r["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    s = r["sampling"]
    click.echo(f"drafter {r['drafter']}  temperature {s['temperature']:g}  top-k {s['top_k']}  top-p {s['top_p']:g}  min-p {s.get('min_p', 0):g}")
    samples = f" x {r['samples_per_prompt']} samples" if r.get("samples_per_prompt", 1) > 1 else ""
    click.echo(f"positions {r['n_positions']} ({r['prompts']} prompts{samples} x {r['new_tokens']} target-sampled tokens)")
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
    if r.get("replay"):
        click.echo("replay along the target's sequences (exact at T=0, expected at T>0): tokens/iteration by gamma "
                   + "  ".join(f"{g}: {_f(v['tokens_per_iteration'], '.3f')}" for g, v in r["replay"].items()))
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
        click.echo("x floor   " + " ".join(f"{t / f:6.1f}" for t, f in zip(cost["verify_seconds"], limits["min_seconds"])))
        click.echo(f"floor: {limits['weight_bytes'] / 1e6:.0f} MB of weights at {limits['bandwidth'] / 1e9:.1f} GB/s "
                   f"(STREAM triad), {limits['matrix_flops_per_token'] / 1e6:.0f} MFLOP per token at "
                   f"{limits['flops'] / 1e9:.0f} GFLOP/s (x floor: each pass's time over its floor, the gap per k)")
        if r.get("context_times"):
            ct = r["context_times"]
            click.echo("t(k) ms by context (for `specdec plan --context L --verify-cost-file` this JSON):")
            click.echo("    L \\ k " + " ".join(f"{k:>6d}" for k in range(1, len(ct["seconds"][0]) + 1)))
            for n, row in zip(ct["contexts"], ct["seconds"]):
                click.echo(f"{n:>9d} " + " ".join(f"{1000 * t:6.1f}" for t in row))
        o = cost["overhead"]
        click.echo(f"loop overhead o(0) {_f(o[0], '.4f')}  o(4) {_f(o[min(4, len(o) - 1)], '.4f')} target steps")
    if r.get("batch_timing"):
        _print_batch(r["batch_timing"])


def _print_batch(bt: dict) -> None:
    click.echo(f"t(B, k) in ms ({bt['context_tokens']} tokens of context, {bt['device']}, {bt['threads']} threads; "
               "one pass over B sequences x k tokens):")
    click.echo("B \\ k " + " ".join(f"{k:>7d}" for k in range(1, len(bt["seconds"][0]) + 1)))
    for b, row in zip(bt["batch_sizes"], bt["seconds"]):
        click.echo(f"{b:>5d} " + " ".join(f"{1000 * s:7.2f}" for s in row))


def _f(value: float | None, spec: str) -> str:
    """A number for the text report; undefined values (None, NaN) read "n/a"."""
    return "n/a" if value is None or value != value else format(value, spec)
