"""`specdec decode`: speculative decoding of one prompt, with its statistics."""
from __future__ import annotations

import click

from specdec.cli.common import (MAX_GAMMA, backend_option, check_context, check_text, drafter_option, generator,
                                in_range, json_option, model_options, positive, preflight_target, refuse_tree_drafter,
                                sampling_options,
                                seed_option, to_json)
from specdec.cli.placement import device_map_options, resolve_placement


@click.command()
@click.option("--prompt", required=True, callback=check_text, help="Prompt text (UTF-8).")
@model_options
@device_map_options
@backend_option
@drafter_option
@click.option("--gamma", type=int, default=4, show_default=True, callback=in_range(0, MAX_GAMMA),
              help=f"Draft tokens per iteration, 0 .. {MAX_GAMMA} (0 = no drafting).")
@sampling_options
@click.option("--lenience", type=float, default=1.0, show_default=True, callback=in_range(0, 1, low_open=True),
              help="App. A.5 lenience l in (0, 1]; l < 1 is NOT exact (output no longer follows p).")
@click.option("--max-new-tokens", type=int, default=64, show_default=True, callback=positive,
              help="Most tokens to generate (the prompt plus these must fit the model's context).")
@click.option("--ignore-eos", is_flag=True, help="Do not stop at the end-of-sequence token.")
@click.option("--baseline", is_flag=True, help="Also run the autoregressive baseline and report the speedup.")
@seed_option
@json_option
def decode(prompt, target_path, device, dtype, device_map, draft_device_map, backend, drafter, gamma, temperature, top_k, top_p, lenience,
           max_new_tokens, ignore_eos, baseline, seed, as_json):
    """Decode a prompt with the target and a drafter; print the text and the statistics."""
    refuse_tree_drafter(drafter, temperatures=[temperature])
    path, limit = preflight_target(target_path)
    check_context(limit, 1 + max_new_tokens + gamma, "--max-new-tokens with --gamma", "--max-new-tokens")

    from specdec.reference.core.loop import autoregressive_decode, speculative_decode
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.core.models import load_model
    from specdec.reference.core.placement import output_device
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.core.target import TargetScorer

    sampling = SamplingConfig(temperature, top_k, top_p)
    place = resolve_placement(device, device_map, draft_device_map, backend, path, (drafter,), one_process=True)
    target = load_model(path, place.device, dtype, backend, place.device_map)
    draft, note = make_drafter(drafter, target, place.device, dtype, place.draft_device_map)
    ids = target.tokenizer(prompt)["input_ids"]
    if not ids:
        raise click.BadParameter("the prompt encodes to no tokens", param_hint="--prompt")
    check_context(limit, len(ids) + max_new_tokens + gamma, f"a {len(ids)}-token prompt with --max-new-tokens "
                  f"{max_new_tokens} and --gamma {gamma}", "--prompt")
    eos = None if ignore_eos else target.tokenizer.eos_token_id
    scorer = TargetScorer(target.model)
    if baseline:  # warm-up, so neither timed run pays for first-call allocations
        autoregressive_decode(scorer, ids, 2, sampling, None)
    gen = generator(output_device(target.model), seed)
    result = speculative_decode(scorer, draft, ids, max_new_tokens, gamma, sampling, gen, eos, lenience,
                                fuse_prefill=True)
    report = {"drafter": drafter, "gamma": gamma, "temperature": temperature, "top_k": top_k,
              "top_p": top_p, "lenience": lenience, "seed": seed, "note": note,
              "text": target.tokenizer.decode(result.tokens), "tokens": result.tokens,
              "stats": result.stats.to_dict()}
    if baseline:
        gen = generator(output_device(target.model), seed)
        base = autoregressive_decode(scorer, ids, max_new_tokens, sampling, gen, eos, fuse_prefill=True)
        report["baseline"] = {"tokens_per_second": base.stats.tokens_per_second(),
                              "time_total": base.stats.time_total, "same_tokens": base.tokens == result.tokens}
        report["speedup"] = base.stats.time_total / result.stats.time_total * (
            result.stats.new_tokens / max(base.stats.new_tokens, 1))
    if as_json:
        click.echo(to_json(report))
        return
    s = result.stats
    if note:
        click.echo(f"note: {note}", err=True)
    click.echo(report["text"])
    click.echo("")
    click.echo(f"drafter {drafter}  gamma {gamma}  temperature {temperature}  new tokens {s.new_tokens}")
    click.echo(f"iterations {s.iterations} (target passes {s.target_passes}; the prompt's encoding fused into "
               f"the first)  tokens/iteration {s.tokens_per_iteration():.3f}  "
               f"alpha {s.alpha():.3f}  mean accepted {s.mean_accepted():.3f} (bonus not counted)")
    click.echo("alpha per position " + " ".join(f"{a:.2f}" for a in s.alpha_per_position()))
    click.echo("accepted-length histogram " + " ".join(str(h) for h in s.accepted_hist))
    click.echo(f"time total {s.time_total:.3f}s  draft {s.time_draft:.3f}s  "
               f"verify {s.time_verify:.3f}s  tokens/s {s.tokens_per_second():.1f}")
    if baseline:
        b = report["baseline"]
        click.echo(f"baseline tokens/s {b['tokens_per_second']:.1f}  speedup {report['speedup']:.2f}x  "
                   f"identical output: {b['same_tokens']}")
