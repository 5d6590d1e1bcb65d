"""`specdec validate`: measured vs predicted speedup for drafters x gammas x temperatures.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target step-time ratio.

Thin: parse, call reference.validation.run_validation, print the tables (or one JSON
object) and write validation.json, validation.md and the figures into --out.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import click

from specdec.estimate_cmd import load_prompts, parse_floats, positive
from specdec.options import json_option, model_options, seed_option
from specdec.drafter_help import SPEC_HELP


def parse_gammas(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    numbers = parse_floats(ctx, param, value)
    if any(g != int(g) or g < 1 for g in numbers):
        raise click.BadParameter(f"gammas must be positive integers, got {value!r}", ctx=ctx, param=param)
    return tuple(int(g) for g in numbers)


def parse_temperatures(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    numbers = parse_floats(ctx, param, value)
    if any(t < 0 for t in numbers):
        raise click.BadParameter(f"temperatures must be >= 0, got {value!r}", ctx=ctx, param=param)
    return numbers


def split_label(spec: str) -> tuple[str, str]:
    """"bigram=ngram:PATH" -> ("bigram", "ngram:PATH"); a plain spec is its own label."""
    label, sep, rest = spec.partition("=")
    if sep and label and not any(ch in label for ch in ":/\\"):
        return label, rest
    return spec, spec


@click.command()
@model_options
@click.option("--drafter", "drafters", multiple=True, required=True,
              help=f"Draft model, repeatable; optionally LABEL=SPEC. SPEC: {SPEC_HELP}")
@click.option("--gammas", default="1,2,4", show_default=True, callback=parse_gammas,
              help="Draft lengths to run, comma-separated.")
@click.option("--temperatures", default="0,1", show_default=True, callback=parse_temperatures,
              help="Sampling temperatures, comma-separated (0 = greedy).")
@click.option("--top-k", type=int, default=0, show_default=True, help="For temperatures > 0; 0 = off.")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="For temperatures > 0; 1 = off.")
@click.option("--prompts", "n_prompts", type=int, default=12, show_default=True, callback=positive,
              help="Held-out prompts to decode per configuration.")
@click.option("--prompt-tokens", type=int, default=64, show_default=True, callback=positive)
@click.option("--new-tokens", type=int, default=16, show_default=True, callback=positive,
              help="Tokens each decode emits (EOS ignored). Many short runs average out machine drift.")
@click.option("--repeats", type=int, default=1, show_default=True, callback=positive,
              help="Repeats of every decode (interleaved).")
@click.option("--alpha-tokens", type=int, default=2048, show_default=True, callback=positive,
              help="Target-sampled positions for the alpha estimator, per temperature.")
@click.option("--alpha-new-tokens", type=int, default=64, show_default=True, callback=positive,
              help="Length of each target-sampled continuation for the estimator "
                   "(ceil(alpha-tokens / alpha-new-tokens) prompts).")
@click.option("--prompts-file", type=click.Path(dir_okay=False), default=None,
              help="Text file with one prompt a line, instead of the held-out corpus prompts.")
@click.option("--max-k", type=int, default=16, show_default=True, callback=positive,
              help="Verify-cost curve v(1..max_k); gammas must be < max_k.")
@click.option("--timing-repeats", type=int, default=7, show_default=True, callback=positive,
              help="Runs of each k for the up-front verify-cost curve v(1..max_k).")
@click.option("--sweep-repeats", type=int, default=2, show_default=True,
              help="Runs of each k <= max(gammas)+1 timed again before every decode block (0 = off).")
@click.option("--retries", type=int, default=3, show_default=True,
              help="Redo a timed run up to this many times when other processes used > 0.1 CPU cores meanwhile.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Time a one-token target pass between decode runs (drift-corrected speedup).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out", show_default=True,
              help="Folder for validation.json, validation.md and the figures.")
@click.option("--no-figures", is_flag=True, help="Do not draw the figures.")
@seed_option
@json_option
def validate(target_path, device, dtype, drafters, gammas, temperatures, top_k, top_p, n_prompts, prompt_tokens,
             new_tokens, repeats, alpha_tokens, alpha_new_tokens, prompts_file, max_k, timing_repeats,
             sweep_repeats, retries, probe, out_dir, no_figures, seed, as_json):
    """Run the reference decoder and the baseline, and compare the measured speedups with the
    simulator's predictions (the paper's Theorem 8 and the extended model)."""
    from reference.drafters import make_drafter
    from reference.models import load_model
    from reference.validation import ValidationConfig, run_validation
    from reference.validation_report import full_report

    if new_tokens < 2:
        raise click.BadParameter(f"must be >= 2, got {new_tokens}", param_hint="--new-tokens")
    if max(gammas) >= max_k:
        raise click.BadParameter(f"gammas must be < --max-k {max_k}, got {max(gammas)}", param_hint="--gammas")
    alpha_prompts = math.ceil(alpha_tokens / alpha_new_tokens)
    config = ValidationConfig(gammas=gammas, temperatures=temperatures, top_k=top_k, top_p=top_p,
                              prompts=n_prompts, prompt_tokens=prompt_tokens, new_tokens=new_tokens, repeats=repeats,
                              alpha_prompts=alpha_prompts, alpha_new_tokens=alpha_new_tokens, max_k=max_k,
                              timing_repeats=timing_repeats, sweep_repeats=sweep_repeats, retries=retries,
                              probe=probe, seed=seed)
    target = load_model(target_path, device, dtype)
    built = {}
    for spec in drafters:
        label, spec = split_label(spec)
        if label in built:
            raise click.BadParameter(f"drafter {label!r} given twice", param_hint="--drafter")
        drafter, note = make_drafter(spec, target, device, dtype)
        if drafter is None:
            raise click.BadParameter("'none' is the baseline, which always runs; give a real drafter",
                                     param_hint="--drafter")
        if note:
            click.echo(f"note ({label}): {note}", err=True)
        built[label] = drafter
    ids, _ = load_prompts(target, max(n_prompts, alpha_prompts), prompt_tokens, prompts_file)
    result = run_validation(target, built, ids[:n_prompts], ids[:alpha_prompts], config, progress=True)
    report = result.to_dict()
    report["target"] = str(target.path)
    report["drafters"] = {label: spec for label, spec in (split_label(s) for s in drafters)}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(report, indent=1) + "\n")
    text = full_report(report, target.path.name)
    (out / "validation.md").write_text(text + "\n")
    if not no_figures:
        from figures.validation import write_all
        report["figures"] = [str(p) for p in write_all(report, out)]
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(text)
    click.echo(f"\nwrote {out / 'validation.json'}, {out / 'validation.md'}"
               + ("" if no_figures else " and " + ", ".join(Path(p).name for p in report["figures"])))
