"""`specdec validate`: measured vs predicted speedup for drafters x gammas x temperatures.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target step-time ratio.

Thin: parse and check, call `specdec.reference.validation.run.run_validation`, write the results
(`specdec.reference.validation.files`) and print the tables (or one JSON object).
"""
from __future__ import annotations

import math
from pathlib import Path

import click

from specdec.cli.common import (GAMMAS, MAX_DECODE_GAMMA, MAX_PROMPTS, MAX_REPEATS, MAX_TOKENS, TEMPERATURES,
                                backend_option, check_context, check_drafter_kinds, check_heads_prompts,
                                json_option, model_options, preflight_prompts, preflight_target, prompt_source,
                                prompt_source_options, refuse_tree_drafter, require_drafter, seed_option)
from specdec.cli.outputs import check_out_dir
from specdec.cli.placement import device_map_options, resolve_placement
from specdec.cli.types import NONNEGATIVE, POSITIVE, UNIT_OPEN_LOW, DrafterSpecType, Number
from specdec.reference.drafters.spec import SPEC_HELP
from specdec.strict_json import to_json


# every file `specdec.reference.validation.files.write_results` may write into --out
VALIDATION_OUTPUTS = ("validation.json", "validation.md", "validation_predicted_vs_measured.png",
                      "validation_relative_error.png", "validation_speedup_by_gamma.png", "validation_verify_cost.png",
                      "validation_beta.png", "validation_by_category.png")


@click.command()
@model_options
@device_map_options
@backend_option
@click.option("--drafter", "drafters", multiple=True, required=True, type=DrafterSpecType(labelled=True),
              help=f"Draft model, repeatable; optionally LABEL=SPEC. SPEC: {SPEC_HELP}")
@click.option("--gammas", default="1,2,4", show_default=True, type=GAMMAS,
              help="Draft lengths to run, comma-separated.")
@click.option("--draft-policy", "draft_policies", multiple=True, metavar="RULE[:KEY=VALUE,...]",
              help="Also decode every drafter under this draft-length rule (repeatable; as decode's --draft-policy, "
                   "its n_max / initial defaulting to max(gammas)), and compare each with the dynamic-draft-length "
                   "prediction from the estimator's confidence law (issue 52).")
@click.option("--thresholds", default=None, metavar="TAU,...",
              help="Shorthand: one 'confidence:tau=TAU' rule per value (n_max = max(gammas)); the values must be "
                   "edges of the estimator's confidence bins (0.1 .. 0.9, 0.95, 0.99).")
@click.option("--temperatures", default="0,1", show_default=True, type=TEMPERATURES,
              help="Sampling temperatures, comma-separated (0 = greedy).")
@click.option("--top-k", type=NONNEGATIVE, default=0, show_default=True, help="For temperatures > 0; 0 = off.")
@click.option("--top-p", type=UNIT_OPEN_LOW, default=1.0, show_default=True,
              help="For temperatures > 0, in (0, 1]; 1 = off.")
@click.option("--prompts", "n_prompts", type=Number(int, 1, MAX_PROMPTS), default=12, show_default=True,
              help="Prompts to decode per configuration (per category).")
@click.option("--prompt-tokens", type=POSITIVE, default=64, show_default=True,
              help="Length of the held-out corpus prompts (the continue workload), in tokens.")
@click.option("--new-tokens", type=Number(int, 2), default=16, show_default=True,
              help="Tokens each decode emits (EOS ignored). Many short runs average out machine drift.")
@click.option("--repeats", type=Number(int, 1, MAX_REPEATS), default=1, show_default=True,
              help="Repeats of every decode (interleaved).")
@click.option("--alpha-tokens", type=Number(int, 1, MAX_TOKENS), default=2048, show_default=True,
              help="Target-sampled positions for the alpha estimator, per temperature.")
@click.option("--alpha-new-tokens", type=POSITIVE, default=64, show_default=True,
              help="Length of each target-sampled continuation for the estimator "
                   "(ceil(alpha-tokens / alpha-new-tokens) prompts).")
@click.option("--batch-size", type=POSITIVE, default=16, show_default=True,
              help="Estimator prompts per batched generation (the unit of work a process takes under torchrun).")
@prompt_source_options
@click.option("--max-k", type=Number(int, 2, MAX_DECODE_GAMMA + 1), default=16, show_default=True,
              help=f"Verify-cost curve v(1..max_k), 2 .. {MAX_DECODE_GAMMA + 1}; gammas must be < max_k.")
@click.option("--timing-repeats", type=Number(int, 1, MAX_REPEATS), default=7, show_default=True,
              help="Runs of each k for the up-front verify-cost curve v(1..max_k).")
@click.option("--sweep-repeats", type=Number(int, 0, MAX_REPEATS), default=2, show_default=True,
              help="Runs of each k <= max(gammas)+1 timed again before every decode block (0 = off).")
@click.option("--retries", type=NONNEGATIVE, default=3, show_default=True,
              help="Redo a timed run up to this many times when other processes used > 0.1 CPU cores meanwhile.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Time a one-token target pass between decode runs (drift-corrected speedup).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out", show_default=True,
              help="Folder for validation.json, validation.md and the figures.")
@click.option("--no-figures", is_flag=True, help="Do not draw the figures.")
@seed_option
@json_option
def validate(target_path, device, dtype, device_map, draft_device_map, backend, drafters, gammas, draft_policies,
             thresholds, temperatures, top_k,
             top_p, n_prompts, prompt_tokens, new_tokens, repeats, alpha_tokens, alpha_new_tokens, batch_size,
             prompts_file, encoder_inputs, workloads, categories, chat_template, max_prompt_tokens, truncate, max_k, timing_repeats, sweep_repeats, retries, probe, out_dir, no_figures, seed, as_json):
    """Run the reference decoder and the baseline, and compare the measured speedups with the
    simulator's predictions (the paper's Theorem 8 and the extended model)."""
    if max(gammas) >= max_k:
        raise click.BadParameter(f"gammas must be < --max-k {max_k}, got {max(gammas)}", param_hint="--gammas")
    policies = _policies(draft_policies, thresholds, gammas, max_k)
    for i, (label, spec) in enumerate(drafters):
        if label in [seen for seen, _ in drafters[:i]]:
            raise click.BadParameter(f"drafter {label!r} given twice", param_hint="--drafter")
        require_drafter(spec, "'none' is the baseline, which always runs; give a real drafter")
        refuse_tree_drafter(spec, "the validation estimates one draft a pass; measure a heads lattice with "
                                  "`specdec heads lattice` and `specdec decode --baseline`")
        check_heads_prompts(spec, prompt_tokens)
    source = prompt_source(prompts_file, workloads, categories, chat_template, max_prompt_tokens, truncate,
                           prompt_tokens, encoder_inputs)
    out = check_out_dir(out_dir, files=VALIDATION_OUTPUTS)
    path, limit = preflight_target(target_path)
    check_drafter_kinds(path, [spec for _, spec in drafters])
    longest = preflight_prompts(path, max(n_prompts, math.ceil(alpha_tokens / alpha_new_tokens)), source).longest
    check_context(limit, longest + new_tokens + max(gammas) + 1, "the longest prompt plus --new-tokens",
                  "--new-tokens")
    check_context(limit, longest + alpha_new_tokens, "the longest prompt plus --alpha-new-tokens", "--alpha-new-tokens")
    check_context(limit, longest + new_tokens + max_k, "the timing context plus --max-k", "--max-k")
    from specdec.reference.validation.config import ValidationConfig, ValidationJob
    from specdec.reference.validation.files import write_results
    from specdec.reference.validation.run import run_validation
    from specdec.reference.validation.suite_report import suite_report

    config = ValidationConfig(gammas=gammas, temperatures=temperatures, top_k=top_k, top_p=top_p,
                              prompts=n_prompts, prompt_tokens=prompt_tokens, new_tokens=new_tokens, repeats=repeats,
                              alpha_prompts=math.ceil(alpha_tokens / alpha_new_tokens),
                              alpha_new_tokens=alpha_new_tokens, batch_size=batch_size, max_k=max_k,
                              timing_repeats=timing_repeats, sweep_repeats=sweep_repeats, retries=retries,
                              probe=probe, seed=seed, policies=policies)
    place = resolve_placement(device, device_map, draft_device_map, backend, path, [spec for _, spec in drafters])
    result = run_validation(ValidationJob(target=path, drafters=dict(drafters), config=config, placement=place,
                                          dtype=dtype, backend=backend, source=source))
    if result is None:  # a torchrun rank other than 0: rank 0 writes and prints
        return
    report = write_results(result, out, figures=not no_figures)
    if as_json:
        click.echo(to_json(report))
        return
    click.echo(suite_report(result))
    click.echo(f"\nwrote {out / 'validation.json'}, {out / 'validation.md'}"
               + ("" if no_figures else " and " + ", ".join(Path(p).name for p in report["figures"])))


def _policies(spellings, thresholds, gammas, max_k) -> tuple[str, ...]:
    """The draft-length rules to run, checked before anything loads (one line naming the option)."""
    from specdec.errors import SpecdecError
    from specdec.reference.core.policy import parse_policy
    from specdec.reference.estimate.confidence import EDGES

    rules = list(spellings)
    if thresholds:
        for part in thresholds.split(","):
            try:
                tau = float(part)
            except ValueError:
                raise click.BadParameter(f"expected numbers, got {part!r}", param_hint="--thresholds") from None
            if not any(abs(tau - e) < 1e-12 for e in EDGES[:-1]):
                raise click.BadParameter(f"{tau:g} is not an edge of the confidence bins {list(EDGES[:-1])}",
                                         param_hint="--thresholds")
            rules.append(f"confidence:tau={tau:g}")
    for rule in rules:
        try:
            policy = parse_policy(rule, max(gammas))
        except SpecdecError as err:
            raise click.BadParameter(str(err), param_hint="--draft-policy") from None
        if type(policy).__name__ not in ("ConfidenceThreshold", "HeuristicSchedule"):
            raise click.BadParameter(f"{rule}: the validation predicts the confidence threshold and the heuristic "
                                     "schedule (confidence:..., heuristic:...)", param_hint="--draft-policy")
        if policy.k_max >= max_k:
            raise click.BadParameter(f"{rule} drafts up to {policy.k_max}: must be < --max-k {max_k}",
                                     param_hint="--draft-policy")
        if getattr(policy, "tau", 0.0) and not any(abs(policy.tau - e) < 1e-12 for e in EDGES[:-1]):
            raise click.BadParameter(f"{rule}: tau must be an edge of the confidence bins {list(EDGES[:-1])} (the "
                                     "prediction reads the law per bin)", param_hint="--draft-policy")
    if len(set(rules)) != len(rules):
        raise click.BadParameter("a draft-length rule given twice", param_hint="--draft-policy")
    return tuple(rules)
