"""`specdec decode`: speculative decoding of one prompt, with its statistics."""
from __future__ import annotations

from pathlib import Path

import click

from specdec.cli.common import (MAX_DECODE_GAMMA, NEW_TOKENS_HINT, backend_option, check_context,
                                check_drafter_kinds, drafter_option, encoder_inputs_option, generator, json_option,
                                model_options, new_tokens_option, preflight_encoder_inputs, preflight_target,
                                prompt_ids, sampling_options, seed_option)
from specdec.cli.placement import device_map_options, resolve_placement
from specdec.cli.types import UNIT_OPEN_LOW, Number, Utf8Text
from specdec.strict_json import to_json


@click.command()
@click.option("--prompt", default=None, type=Utf8Text(),
              help="Prompt text (UTF-8); for an encoder-decoder target, the encoder's input.")
@encoder_inputs_option
@model_options
@device_map_options
@backend_option
@drafter_option
@click.option("--gamma", type=Number(int, 0, MAX_DECODE_GAMMA), default=4, show_default=True,
              help=f"Draft tokens per iteration, 0 .. {MAX_DECODE_GAMMA} (0 = no drafting).")
@click.option("--draft-policy", default="fixed", show_default=True, metavar="RULE[:KEY=VALUE,...]",
              help="Draft length per iteration: fixed (--gamma); confidence:tau=0.4,n_min=0,keep_last=0 (stop "
                   "before a position past n_min whose draft top probability is below tau, at most --gamma; "
                   "keep_last=1: after it); heuristic:n_max=64,persist=0 (transformers' schedule from --gamma: +2 "
                   "after a fully accepted draft, -1 otherwise).")
@sampling_options
@click.option("--lenience", type=UNIT_OPEN_LOW, default=1.0, show_default=True,
              help="App. A.5 lenience l in (0, 1]; l < 1 is NOT exact (output no longer follows p).")
@new_tokens_option
@click.option("--ignore-eos", is_flag=True, help="Do not stop at the end-of-sequence token.")
@click.option("--baseline", is_flag=True,
              help="Also run the autoregressive baseline, interleaved, and report the measured speedup (decode time "
                   "per token, prefill excluded and shown beside it).")
@seed_option
@json_option
def decode(prompt, encoder_inputs, target_path, device, dtype, device_map, draft_device_map, backend, drafter, gamma,
           draft_policy, temperature, top_k, top_p, min_p, lenience, new_tokens, ignore_eos, baseline, seed, as_json):
    """Decode a prompt with the target and a drafter; print the text and the statistics."""
    from specdec.errors import SpecdecError
    from specdec.reference.core.policy import parse_policy  # torch-free: checked before anything loads

    try:
        policy = parse_policy(draft_policy, gamma)
    except SpecdecError as err:
        raise click.BadParameter(str(err), param_hint="--draft-policy") from None
    if policy.k_max > MAX_DECODE_GAMMA:
        raise click.BadParameter(f"drafts up to {policy.k_max} tokens, more than {MAX_DECODE_GAMMA}",
                                 param_hint="--draft-policy")
    path, limit = preflight_target(target_path)
    check_context(limit, 1 + new_tokens + policy.k_max, "--new-tokens with --gamma", NEW_TOKENS_HINT)
    check_drafter_kinds(path, (drafter,))
    features = preflight_encoder_inputs(path, encoder_inputs)
    if (prompt is None) == (features is None):
        raise click.BadParameter("give the prompt text, or (for an encoder that reads features) --encoder-inputs, "
                                 "not both", param_hint="--prompt")
    if features is not None and len(features.ids) != 1:
        raise click.BadParameter(f"decode takes one example, the file holds {len(features.ids)}",
                                 param_hint="--encoder-inputs")
    ids, positions = (None, 0) if prompt is None else prompt_ids(path, prompt)
    if ids is not None:  # the decoder's prompt (an encoder-decoder's: its start token; the text goes to the encoder)
        check_context(limit, positions + new_tokens + policy.k_max, f"a {positions}-token prompt with --new-tokens "
                      f"{new_tokens} and --gamma {gamma}", "--prompt")

    from specdec.reference.core.loop import SpeculativeSampling
    from specdec.reference.model.models import load_model
    from specdec.reference.model.placement import output_device
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.data.encoder_inputs import load_target_prompts, model_prompts
    from specdec.reference.data.prompts import PromptSource
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.measure.harness import Decoding
    from specdec.reference.measure.speedup import compare

    sampling = SamplingConfig(temperature, top_k, top_p, min_p)
    place = resolve_placement(device, device_map, draft_device_map, backend, path, (drafter,), one_process=True)
    target = load_model(path, place.device, dtype, backend, place.device_map)
    draft, note = make_drafter(drafter, target, place.device, dtype, place.draft_device_map)
    if features is None:
        ids = model_prompts(target, [ids])[0]  # an encoder-decoder's: the text to the encoder
    else:
        ids = load_target_prompts(target, 1, PromptSource(encoder_inputs=Path(encoder_inputs))).ids[0]
    eos = None if ignore_eos else target.tokenizer.eos_token_id
    scorer = TargetScorer(target.model)
    method = Decoding(drafter, draft, policy, SpeculativeSampling(lenience))
    report = {"drafter": drafter, "gamma": gamma, "draft_policy": draft_policy, "temperature": temperature, "top_k": top_k,
              "top_p": top_p, "min_p": min_p, "lenience": lenience, "seed": seed, "note": note}
    if baseline:  # the one comparison harness: interleaved, separate prefill excluded from the speedup
        with draft:
            comparison, runs = compare(method, scorer, [ids], new_tokens, sampling, seed=seed, eos_id=eos,
                                       seeds=lambda r, j: seed, warm_up=2)
        result, base = runs[drafter][0].result, runs["baseline"][0].result
        (base_tokens, tokens), (base_seconds, seconds) = comparison.tokens, comparison.seconds
        report["baseline"] = {"tokens_per_second": base_tokens / base_seconds,  # decode time: prefill excluded
                              "time_total": base.stats.time_total, "same_tokens": base.tokens == result.tokens}
        report["tokens_per_second"] = tokens / seconds
        report["speedup"] = comparison.speedup
        report["comparison"] = comparison.to_dict()
    else:  # the prompt's encoding fused into the first pass, as Hugging Face's generate does
        with draft:
            result = method.decode(scorer, ids, new_tokens, sampling, generator(output_device(target.model), seed),
                                   eos, fuse_prefill=True)
    report.update({"text": target.tokenizer.decode(result.tokens), "tokens": result.tokens,
                   "stats": result.stats.to_dict()})
    if as_json:
        click.echo(to_json(report))
        return
    s = result.stats
    if note:
        click.echo(f"note: {note}", err=True)
    click.echo(report["text"])
    click.echo("")
    rule = "" if draft_policy == "fixed" else f"  draft policy {draft_policy}"
    click.echo(f"drafter {drafter}  gamma {gamma}{rule}  temperature {temperature}  new tokens {s.new_tokens}")
    prefill = "the prompt encoded by a pass of its own" if baseline else "the prompt's encoding fused into the first"
    click.echo(f"iterations {s.iterations} (target passes {s.target_passes}; {prefill})  "
               f"tokens/iteration {s.tokens_per_iteration():.3f}  "
               f"alpha {s.alpha():.3f}  mean accepted {s.mean_accepted():.3f} (bonus not counted)")
    click.echo("alpha per position " + " ".join(f"{a:.2f}" for a in s.alpha_per_position()))
    click.echo("accepted-length histogram " + " ".join(str(h) for h in s.accepted_hist))
    click.echo(f"time total {s.time_total:.3f}s  draft {s.time_draft:.3f}s  verify {s.time_verify:.3f}s  "
               + (f"tokens/s {s.tokens_per_second():.1f}" if not baseline else
                  f"decode tokens/s {report['tokens_per_second']:.1f} (prefill excluded)"))
    if baseline:
        b, c = report["baseline"], report["comparison"]
        click.echo(f"baseline decode tokens/s {b['tokens_per_second']:.1f}  speedup {report['speedup']:.2f}x "
                   f"(decode time per token; prefill {1000 * c['prefill_seconds'][0]:.1f} ms baseline, "
                   f"{1000 * c['prefill_seconds'][1]:.1f} ms this method)  identical output: {b['same_tokens']}")
