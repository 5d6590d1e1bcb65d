"""`specdec serve-bench`: ragged batched decoding at serving scale, measured and predicted.

Thin: parse and check (before any model loads), call `specdec.reference.measure.serving.serve_bench`,
write serve.json, serve.md and serve.png into --out (each through a temporary name) and print
the tables (or one JSON object).
"""
from __future__ import annotations

import click

from specdec.cli.common import (GAMMAS, MAX_PROMPTS, backend_option, check_context, json_option,
                                model_options, preflight_target, require_drafter)
from specdec.cli.outputs import check_out_dir
from specdec.cli.types import DrafterSpecType, Number, NumberList
from specdec.reference.drafters.spec import SPEC_HELP
from specdec.strict_json import to_json

MAX_BATCH = 256


@click.command("serve-bench")
@model_options
@backend_option
@click.option("--drafter", "drafters", multiple=True, required=True, type=DrafterSpecType(labelled=True),
              help=f"Draft model, repeatable; optionally LABEL=SPEC. SPEC: {SPEC_HELP}")
@click.option("--gammas", default="2,4", show_default=True, type=GAMMAS, help="Draft lengths, comma-separated.")
@click.option("--batch-sizes", default="1,2,4,8,16,32", show_default=True, metavar="B1,B2,...",
              type=NumberList(int, 1, MAX_BATCH, increasing=True, what="batch sizes"),
              help="Batch sizes (slots decoding at once); the first is the one the predictions start from.")
@click.option("--contexts", default="128,1024", show_default=True, metavar="L1,L2,...",
              type=NumberList(int, 2, increasing=True, what="context lengths"),
              help="Prompt lengths in tokens (held-out corpus windows), one measurement per length.")
@click.option("--new-tokens", type=Number(int, 2, 4096), default=24, show_default=True,
              help="Tokens each request emits; a run decodes max(B, --prompts) requests' worth.")
@click.option("--prompts", "n_prompts", type=Number(int, 1, MAX_PROMPTS), default=8, show_default=True,
              help="Distinct prompts per context (the queue cycles through them).")
@click.option("--blocks", type=Number(int, 2, 100), default=2, show_default=True,
              help="Interleaved runs of every method per batch size (the speedup's interval is over them).")
@click.option("--timing-repeats", type=Number(int, 1, 100), default=3, show_default=True,
              help="Timed runs of each t(B, k) (the median is kept).")
@click.option("--layout", type=click.Choice(["padded", "packed"]), default="padded", show_default=True,
              help="How a pass lays out the rows: right-padded [B, T] or packed end to end [1, sum T].")
@click.option("--slo-ms", type=Number(float, 0, None, low_open=True), default=150.0, show_default=True,
              help="Goodput counts the requests whose time per output token is at most this (ms).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out/serve", show_default=True,
              help="Folder for serve.json, serve.md and serve.png.")
@json_option
def serve_bench(target_path, device, dtype, backend, drafters, gammas, batch_sizes, contexts, new_tokens,
                n_prompts, blocks, timing_repeats, layout, slo_ms, out_dir, as_json):
    """Decode B requests at once with continuous batching (each row accepting its own count) for
    every batch size and context length: throughput, per-token latency p50/p99 and goodput of
    plain batched decoding and each drafter, the measured speedups against those the ragged batch
    model predicts from the batch-1 runs and t(B, k, L), and where speculation stops paying."""
    from specdec.costfiles import KIND_SERVE
    from specdec.paths import publishing
    from specdec.reference.model.models import load_model
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.measure.serving import ServeConfig
    from specdec.reference.measure.serving import serve_bench as run
    from specdec.reference.measure.serving_report import serve_markdown

    labels = [label for label, _ in drafters]
    for i, (label, spec) in enumerate(drafters):
        if label in labels[:i]:
            raise click.BadParameter(f"drafter {label!r} given twice", param_hint="--drafter")
        require_drafter(spec, "'none' is plain batched decoding, which always runs; give a real drafter")
    path, limit = preflight_target(target_path, "ragged batches")
    check_context(limit, max(contexts) + new_tokens + max(gammas) + 2, "the longest context plus --new-tokens",
                  "--contexts")
    out = check_out_dir(out_dir, files=("serve.json", "serve.md", "serve.png"))
    config = ServeConfig(batch_sizes=tuple(batch_sizes), contexts=tuple(contexts), gammas=tuple(gammas),
                         new_tokens=new_tokens, prompts=n_prompts, blocks=blocks, timing_repeats=timing_repeats,
                         layout=layout, slo_ms=slo_ms)
    target = load_model(path, device, dtype, backend)
    built = {label: make_drafter(spec, target, device, dtype)[0] for label, spec in drafters}
    prompt_sets = {n: held_out_prompts(n_prompts, n, path)[0] for n in contexts}
    result = run(target.model, prompt_sets, built, config, progress=lambda line: click.echo(line, err=True))
    result = {"kind": KIND_SERVE, **result, "target": str(path), "drafters": dict(drafters), "device": str(device),
              "backend": target.backend}
    markdown = serve_markdown(result)
    from specdec.figures.serving import serving_figure
    with publishing(out) as work:
        (work / "serve.json").write_text(to_json(result), encoding="utf-8")
        (work / "serve.md").write_text(markdown, encoding="utf-8")
        serving_figure(result, work / "serve.png")
    if as_json:
        click.echo(to_json(result))
        return
    click.echo(markdown)
    click.echo(f"wrote {out / 'serve.json'}, {out / 'serve.md'} and {out / 'serve.png'}")
