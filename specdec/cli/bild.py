"""`specdec bild`: Big Little Decoder (fallback + rollback) vs the target, speed and quality.

One policy: decode the prompts with BiLD and with the greedy autoregressive baseline,
report the speedup and the quality measured against the target. `--sweep`: run a grid
of fallback x rollback thresholds, the two ablations and exact speculative decoding at
several gamma, write bild_sweep.json and the trade-off figure into --out.
"""
from __future__ import annotations

from pathlib import Path

import click

from specdec.cli.common import (GAMMAS, MAX_DECODE_GAMMA, MAX_PROMPTS, MAX_REPEATS, NEW_TOKENS_HINT, backend_option,
                                check_context, check_drafter_kinds, drafter_option,
                                encoder_inputs_option, json_option, model_options, new_tokens_option,
                                preflight_encoder_inputs, preflight_target, prompt_ids, refuse_tree_drafter,
                                require_drafter, sampling_options, seed_option)
from specdec.cli.outputs import check_out_dir
from specdec.cli.placement import device_map_options, resolve_placement
from specdec.cli.types import POSITIVE, PROBABILITY, Number, NumberList, Renamed, Rollback, Utf8Text
from specdec.paths import publishing
from specdec.strict_json import to_json


@click.command()
@click.option("--prompt", "prompts", multiple=True, type=Utf8Text(),
              help="Prompt text (repeatable, UTF-8). Default: held-out corpus prompts.")
@encoder_inputs_option
@click.option("--prompts", "n_prompts", cls=Renamed, old=("--heldout",), type=Number(int, 1, MAX_PROMPTS), default=8,
              show_default=True,
              help="Without --prompt: how many held-out Shakespeare/Austen prompts to use.")
@click.option("--prompt-tokens", type=POSITIVE, default=64, show_default=True,
              help="Length of each held-out prompt.")
@model_options
@device_map_options
@backend_option
@drafter_option
@click.option("--fallback", type=PROBABILITY, default=0.5, show_default=True,
              help="alpha_FB in [0, 1]: the little model hands over before a token whose top probability "
                   "is below it; 0 = no fallback policy (hand over every --max-little-steps tokens).")
@click.option("--rollback", default="3", show_default=True, type=Rollback(),
              help="alpha_RB in nats: roll back at the first little token y with -log p_L(y) > alpha_RB; "
                   "'inf' = no rollback; 'argmax' = roll back any token that is not the target's argmax.")
@click.option("--max-little-steps", type=Number(int, 1, MAX_DECODE_GAMMA), default=10, show_default=True,
              help=f"Most little-model tokens per large-model pass, 1 .. {MAX_DECODE_GAMMA}.")
@sampling_options
@new_tokens_option
@click.option("--ignore-eos", is_flag=True, help="Do not stop at the end-of-sequence token.")
@click.option("--sweep", is_flag=True, help="Sweep thresholds, ablations and exact SD; write --out/bild_tradeoff.png "
                                            "(--fallback/--rollback are then ignored).")
@click.option("--fallbacks", default="0.05,0.1,0.2,0.4", show_default=True,
              type=NumberList(float, 0, 1, what="fallback thresholds"), help="Sweep: alpha_FB values.")
@click.option("--rollbacks", default="2,4,inf,argmax", show_default=True, type=Rollback(many=True),
              help="Sweep: alpha_RB values (inf = no-rollback ablation).")
@click.option("--handovers", default="4", show_default=True, type=NumberList(int, 1, MAX_DECODE_GAMMA, distinct=True,
                                                                            empty_ok=True, what="values"),
              help="Sweep: no-fallback ablation, hand over every N little tokens ('' = skip).")
@click.option("--gammas", default="1,2,4", show_default=True, type=GAMMAS,
              help="Sweep: exact speculative decoding gammas.")
@click.option("--repeats", type=Number(int, 1, MAX_REPEATS), default=1, show_default=True,
              help="Run everything this many times and keep the fastest time per (method, prompt).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Sweep: folder for bild_sweep.json and bild_tradeoff.png.")
@seed_option
@json_option
def bild(prompts, encoder_inputs, n_prompts, prompt_tokens, target_path, device, dtype, device_map, draft_device_map,
         backend, drafter,
         fallback, rollback, max_little_steps, temperature, top_k, top_p, min_p, new_tokens, ignore_eos, sweep, fallbacks,
         rollbacks, handovers, gammas, repeats, out, seed, as_json):
    """Big Little Decoder: the drafter is the little model, the target the large one."""
    if sweep and out is None:
        raise click.BadParameter("--sweep writes a figure: give --out DIR", param_hint="--out")
    steps = max([max_little_steps, *gammas, *handovers]) if sweep else max_little_steps
    require_drafter(drafter, "BiLD needs a little model: lookup[:N], ngram:PATH or model:PATH")
    refuse_tree_drafter(drafter, "BiLD's fallback and rollback take one draft a pass")
    out_dir = check_out_dir(out, files=("bild_sweep.json", "bild_tradeoff.png")) if sweep else None
    path, limit = preflight_target(target_path)
    check_drafter_kinds(path, (drafter,))
    features = preflight_encoder_inputs(path, encoder_inputs)
    if features is not None and prompts:
        raise click.BadParameter("give --prompt or --encoder-inputs, not both", param_hint="--encoder-inputs")
    if not prompts:
        check_context(limit, prompt_tokens + new_tokens + steps, "--prompt-tokens plus --new-tokens", NEW_TOKENS_HINT)
    encoded = [prompt_ids(path, p) for p in prompts]  # (ids, the positions the decoder's prompt takes)
    texts = [ids for ids, _ in encoded]
    if encoded:
        check_context(limit, max(n for _, n in encoded) + new_tokens + steps, "the longest --prompt plus --new-tokens",
                      "--prompt")
    from specdec.reference.bild.policy import BildPolicy
    from specdec.reference.bild.sweep import Method, run_sweep, sweep_methods
    from specdec.reference.model.models import load_model
    from specdec.reference.core.progress import progress as progress_bar
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.data.encoder_inputs import load_target_prompts, model_prompts
    from specdec.reference.data.prompts import PromptSource
    from specdec.reference.drafters.factory import make_drafter

    if sweep:
        methods = sweep_methods(fallbacks, rollbacks, gammas, handovers, max_little_steps)
    else:
        methods = [Method("bild", policy=BildPolicy(fallback, rollback, max_little_steps))]
    sampling = SamplingConfig(temperature, top_k, top_p, min_p)
    place = resolve_placement(device, device_map, draft_device_map, backend, path, (drafter,), one_process=True)
    target = load_model(path, place.device, dtype, backend, place.device_map)
    little, note = make_drafter(drafter, target, place.device, dtype, place.draft_device_map)
    if prompts:
        ids = model_prompts(target, texts)
    elif features is not None:
        ids = load_target_prompts(target, n_prompts, PromptSource(encoder_inputs=Path(encoder_inputs))).ids
    else:
        from specdec.reference.data.corpus import eval_prompts
        ids = model_prompts(target, [list(p.ids) for p in eval_prompts(n_prompts, prompt_tokens,
                                                                       tokenizer_dir=target.path)])
    eos = None if ignore_eos else target.tokenizer.eos_token_id
    bar = progress_bar((len(methods) + 1) * len(ids) * repeats, "decoding", "run", not as_json)
    with little:
        rows = run_sweep(TargetScorer(target.model), little, ids, methods, new_tokens, sampling, seed, eos, repeats,
                         lambda run: bar.update(1))
    bar.close()
    report = {"drafter": drafter, "note": note, "temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
              "seed": seed, "new_tokens": new_tokens, "prompts": len(ids), "repeats": repeats, "rows": rows}
    if sweep:
        from specdec.figures.bild import bild_tradeoff
        with publishing(out_dir) as work:
            drawn = bild_tradeoff(rows, work, title=f"BiLD trade-off: little model {drafter}")
            report["figure"] = str(out_dir / drawn.name)
            (work / "bild_sweep.json").write_text(to_json(report, indent=1) + "\n", encoding="utf-8")
    elif len(ids) == 1:
        report["text"] = target.tokenizer.decode(rows[1]["outputs"][0])
        report["target_text"] = target.tokenizer.decode(rows[0]["outputs"][0])
    if as_json:
        click.echo(to_json(report))
        return
    if note:
        click.echo(f"note: {note}", err=True)
    if "text" in report:
        click.echo(f"BiLD:   {report['text']!r}\ntarget: {report['target_text']!r}\n")
    click.echo(f"little model {drafter}, {len(ids)} prompt(s), up to {new_tokens} new tokens, "
               f"quality vs the target's greedy output")
    click.echo(f"{'method':<36} {'speedup':>7} {'(cpu)':>6} {'tok/pass':>8} {'little':>6} {'match':>6} {'prefix':>6} "
               f"{'argmax':>6} {'loglik':>7}")
    for r in rows:
        click.echo(f"{r['label']:<36} {r['speedup']:7.2f} {r['speedup_cpu']:6.2f} {r['tokens_per_pass']:8.2f} "
                   f"{r['little_fraction']:6.2f} "
                   f"{r['match_rate']:6.3f} {r['mean_prefix']:6.1f} {r['argmax_rate']:6.3f} "
                   f"{r['mean_log_likelihood']:7.3f}")
    if "figure" in report:
        click.echo(f"wrote {report['figure']} and {Path(out) / 'bild_sweep.json'}")
