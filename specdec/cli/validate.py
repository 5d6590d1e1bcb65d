"""`specdec validate`: measured vs predicted speedup for drafters x gammas x temperatures.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target step-time ratio.

Thin: parse, call specdec.reference.validation.run.run_validation, print the tables (or one JSON
object) and write validation.json, validation.md and the figures into --out.
"""
from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import click

from specdec.cli.common import (MAX_GAMMA, backend_option, check_context, check_out_dir, in_range, json_option,
                                load_prompts, model_options, nonnegative, parse_drafter, parse_positive_ints,
                                parse_temperatures, positive, preflight_target, prompts_file_option,
                                refuse_tree_drafter, require_drafter, seed_option, split_label, to_json, write_atomic)
from specdec.cli.placement import device_map_options, resolve_placement
from specdec.reference.drafters.spec import SPEC_HELP


@click.command()
@model_options
@device_map_options
@backend_option
@click.option("--drafter", "drafters", multiple=True, required=True,
              help=f"Draft model, repeatable; optionally LABEL=SPEC. SPEC: {SPEC_HELP}")
@click.option("--gammas", default="1,2,4", show_default=True, callback=parse_positive_ints,
              help="Draft lengths to run, comma-separated.")
@click.option("--temperatures", default="0,1", show_default=True, callback=parse_temperatures,
              help="Sampling temperatures, comma-separated (0 = greedy).")
@click.option("--top-k", type=int, default=0, show_default=True, callback=nonnegative,
              help="For temperatures > 0; 0 = off.")
@click.option("--top-p", type=float, default=1.0, show_default=True, callback=in_range(0, 1, low_open=True),
              help="For temperatures > 0, in (0, 1]; 1 = off.")
@click.option("--prompts", "n_prompts", type=int, default=12, show_default=True, callback=positive,
              help="Held-out prompts to decode per configuration.")
@click.option("--prompt-tokens", type=int, default=64, show_default=True, callback=positive,
              help="Prompt length in tokens (held-out chunks, or cut from --prompts-file).")
@click.option("--new-tokens", type=int, default=16, show_default=True, callback=positive,
              help="Tokens each decode emits (EOS ignored). Many short runs average out machine drift.")
@click.option("--repeats", type=int, default=1, show_default=True, callback=positive,
              help="Repeats of every decode (interleaved).")
@click.option("--alpha-tokens", type=int, default=2048, show_default=True, callback=positive,
              help="Target-sampled positions for the alpha estimator, per temperature.")
@click.option("--alpha-new-tokens", type=int, default=64, show_default=True, callback=positive,
              help="Length of each target-sampled continuation for the estimator "
                   "(ceil(alpha-tokens / alpha-new-tokens) prompts).")
@click.option("--batch-size", type=int, default=16, show_default=True, callback=positive,
              help="Estimator prompts per batched generation (the unit of work a process takes under torchrun).")
@prompts_file_option
@click.option("--max-k", type=int, default=16, show_default=True, callback=in_range(2, MAX_GAMMA + 1),
              help=f"Verify-cost curve v(1..max_k), 2 .. {MAX_GAMMA + 1}; gammas must be < max_k.")
@click.option("--timing-repeats", type=int, default=7, show_default=True, callback=positive,
              help="Runs of each k for the up-front verify-cost curve v(1..max_k).")
@click.option("--sweep-repeats", type=int, default=2, show_default=True, callback=nonnegative,
              help="Runs of each k <= max(gammas)+1 timed again before every decode block (0 = off).")
@click.option("--retries", type=int, default=3, show_default=True, callback=nonnegative,
              help="Redo a timed run up to this many times when other processes used > 0.1 CPU cores meanwhile.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Time a one-token target pass between decode runs (drift-corrected speedup).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out", show_default=True,
              help="Folder for validation.json, validation.md and the figures.")
@click.option("--no-figures", is_flag=True, help="Do not draw the figures.")
@seed_option
@json_option
def validate(target_path, device, dtype, device_map, draft_device_map, backend, drafters, gammas, temperatures, top_k, top_p, n_prompts,
             prompt_tokens, new_tokens, repeats, alpha_tokens, alpha_new_tokens, batch_size, prompts_file, max_k,
             timing_repeats, sweep_repeats, retries, probe, out_dir, no_figures, seed, as_json):
    """Run the reference decoder and the baseline, and compare the measured speedups with the
    simulator's predictions (the paper's Theorem 8 and the extended model)."""
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.core.models import load_model
    from specdec.reference.validation.config import ValidationConfig
    import time

    from specdec.reference.distributed.collect import gather_on_main
    from specdec.reference.distributed.ranks import process_group
    from specdec.reference.validation.alphas import score_alpha_share, summarize_alphas
    from specdec.reference.validation.run import run_validation
    from specdec.reference.validation.report import full_report

    if new_tokens < 2:
        raise click.BadParameter(f"must be >= 2, got {new_tokens}", param_hint="--new-tokens")
    if max(gammas) >= max_k:
        raise click.BadParameter(f"gammas must be < --max-k {max_k}, got {max(gammas)}", param_hint="--gammas")
    labelled = [split_label(spec) for spec in drafters]
    for i, (label, spec) in enumerate(labelled):
        if label in [seen for seen, _ in labelled[:i]]:
            raise click.BadParameter(f"drafter {label!r} given twice", param_hint="--drafter")
        parse_drafter(None, None, spec)
        require_drafter(spec, "'none' is the baseline, which always runs; give a real drafter")
        refuse_tree_drafter(spec, "the validation estimates one draft a pass; measure a heads lattice with "
                                  "`specdec heads lattice` and `specdec decode --baseline`")
    path, limit = preflight_target(target_path)
    check_context(limit, prompt_tokens + new_tokens + max(gammas) + 1, "--prompt-tokens plus --new-tokens",
                  "--new-tokens")
    check_context(limit, prompt_tokens + alpha_new_tokens, "--prompt-tokens plus --alpha-new-tokens",
                  "--alpha-new-tokens")
    check_context(limit, prompt_tokens + new_tokens + max_k, "the timing context plus --max-k", "--max-k")
    out = check_out_dir(out_dir)
    alpha_prompts = math.ceil(alpha_tokens / alpha_new_tokens)
    config = ValidationConfig(gammas=gammas, temperatures=temperatures, top_k=top_k, top_p=top_p,
                              prompts=n_prompts, prompt_tokens=prompt_tokens, new_tokens=new_tokens, repeats=repeats,
                              alpha_prompts=alpha_prompts, alpha_new_tokens=alpha_new_tokens, batch_size=batch_size,
                              max_k=max_k,
                              timing_repeats=timing_repeats, sweep_repeats=sweep_repeats, retries=retries,
                              probe=probe, seed=seed)
    place = resolve_placement(device, device_map, draft_device_map, backend, path, drafters)
    ranks = place.ranks
    loaded: dict = {}

    def work():  # every rank: load, then the alpha part for its share of the estimator's prompts
        target = load_model(path, place.device, dtype, backend, place.device_map)
        built = {}
        for label, spec in labelled:
            drafter, note = make_drafter(spec, target, place.device, dtype, place.draft_device_map)
            if note and ranks.main:
                click.echo(f"note ({label}): {note}", err=True)
            built[label] = drafter
        ids, _ = load_prompts(target, max(n_prompts, alpha_prompts), prompt_tokens, prompts_file)
        loaded.update(target=target, built=built, ids=ids)
        if not ranks.parallel:
            return None  # one process: run_validation estimates alpha itself
        return score_alpha_share(target, built, ids[:alpha_prompts], ranks.share(len(ids[:alpha_prompts]),
                                 config.batch_size), config, progress=ranks.main)

    start = time.perf_counter()
    with process_group(ranks, place.device):
        shares = gather_on_main(ranks, work)
    if shares is None:  # not rank 0: its share is with rank 0, which times, decodes and writes
        return
    target, built, ids = loaded["target"], loaded["built"], loaded["ids"]
    alpha_part = None
    if ranks.parallel:
        alphas, samples = summarize_alphas(shares, len(ids[:alpha_prompts]), list(built), config)
        alpha_part = (alphas, samples, time.perf_counter() - start)
    result = run_validation(target, built, ids[:n_prompts], ids[:alpha_prompts], config, progress=True,
                            alpha_part=alpha_part)
    result.machine["processes"] = ranks.world_size
    result.target, result.drafters = str(target.path), dict(labelled)
    report = result.to_dict()
    text = full_report(result)
    # all outputs or none: render into a scratch folder, then move each file into place
    scratch = Path(out) / f".validation-{os.getpid()}"
    scratch.mkdir()
    try:
        names = []
        if not no_figures:
            from specdec.figures.validation import write_all
            names = [Path(p).name for p in write_all(result, scratch)]
        for name in names:
            os.replace(scratch / name, out / name)
        report["figures"] = [str(out / name) for name in names]
        write_atomic(out / "validation.md", text + "\n")
        write_atomic(out / "validation.json", to_json(report, indent=1) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if as_json:
        click.echo(to_json(report))
        return
    click.echo(text)
    click.echo(f"\nwrote {out / 'validation.json'}, {out / 'validation.md'}"
               + ("" if no_figures else " and " + ", ".join(Path(p).name for p in report["figures"])))
