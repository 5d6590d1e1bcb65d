"""`specdec draft`: an independent draft model distilled from the target (train it, export it).

    specdec draft train --out DIR [--layers 1] [--tokens N] ...   distil a Llama draft (HF folder + card.json)
    specdec draft export DIR --out FILE.gguf [--type f32]          the same model as a GGUF file for llama.cpp (-md)

Use it with `--drafter model:DIR` or `model:FILE.gguf` in decode, estimate, validate, serve-bench and
bild. docs/draft-model.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from specdec.cli.common import MAX_SEED, device_option, json_option, target_option, training_data_options
from specdec.cli.outputs import check_creatable
from specdec.cli.types import Number, Workloads
from specdec.strict_json import to_json

MAX_LAYERS = 16  # a draft deeper than this is no longer cheap next to a 30-layer target


@click.group()
def draft() -> None:
    """An independent draft model distilled from the target (Leviathan et al.'s setting: a small model of the
    target's family with its vocabulary)."""


def source_layers_option(text: str, layers: int) -> tuple[int, ...]:
    """--source-layers: layer numbers separated by commas, one per draft layer (checked against
    the target's depth later, with its config); '' = the default choice."""
    if not text.strip():
        return ()
    try:
        picked = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise click.BadParameter(f"layer numbers separated by commas, got {text!r}", param_hint="--source-layers") \
            from None
    if len(picked) != layers:
        raise click.BadParameter(f"{len(picked)} layers given for a draft of --layers {layers}",
                                 param_hint="--source-layers")
    return picked


@draft.command()
@target_option
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (a Hugging Face model folder + card.json), built beside it and renamed into place.")
@click.option("--force", is_flag=True, help="Replace a draft already in --out (otherwise an error).")
@training_data_options
@click.option("--layers", type=Number(int, 1, MAX_LAYERS), default=1, show_default=True,
              help="Decoder layers of the draft (the target's width, heads and embedding).")
@click.option("--source-layers", default="", metavar="I,J,...",
              help="The target layers the draft's layers start as, one per draft layer (default: the first --layers "
                   "layers).")
@click.option("--train-temperature", type=Number(float, 0, 100, low_open=True), default=1.0, show_default=True,
              help="T of the distillation loss KL(p_T || q_T) (p: the target's stored top-16, renormalised).")
@click.option("--epochs", type=Number(int, 1, 1000), default=2, show_default=True, help="Passes over the windows.")
@click.option("--batch", type=Number(int, 1, 1024), default=4, show_default=True, help="Windows per step.")
@click.option("--lr", type=Number(float, 0, 1, low_open=True), default=5e-4, show_default=True,
              help="AdamW's peak learning rate (one-cycle schedule).")
@click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
              help="Seeds the order of the windows (and the alpha estimate's prompts).")
@click.option("--alpha-workload", "alpha_workloads", type=Workloads(), default="code,edit,chat", show_default=True,
              help="Workloads whose alpha (T = 0, the estimator on the saved draft) the card records.")
@click.option("--alpha-tokens", type=Number(int, 0, 100_000), default=512, show_default=True,
              help="Target tokens scored per workload for the card's alpha (0: skip it).")
@device_option
@json_option
def train(target_path, out, force, tokens, aligned_tokens, sampled_from, code_tokens, window, layers, source_layers,
          train_temperature, epochs, batch, lr, seed, alpha_workloads, alpha_tokens, device, as_json):
    """Distil a draft model from the target: its width, tokenizer and (tied, frozen) embedding, a few
    decoder layers started from the target's and trained on KL to the target's distribution over the
    heads' training data; saved with a card (data, steps, held-out top-1, alpha per workload)."""
    from specdec.cli.common import preflight_training, prompt_source

    picked = source_layers_option(source_layers, layers)
    path, data_config = preflight_training(target_path, out, force, tokens, aligned_tokens, sampled_from, code_tokens,
                                           window)
    depth = target_depth(path)
    if layers > depth or any(not 0 <= i < depth for i in picked):
        what = "--layers" if layers > depth else "--source-layers"
        raise click.BadParameter(f"the target has {depth} layers (numbered 0..{depth - 1})", param_hint=what)
    source = prompt_source(None, alpha_workloads, None, "auto", 2048, "refuse") if alpha_tokens else None
    from specdec.reference.draftmodel.train import DraftTrainConfig  # torch: after the options are checked
    config = DraftTrainConfig(layers=layers, source_layers=picked, temperature=train_temperature, epochs=epochs,
                              batch=batch, lr=lr, seed=seed)
    from specdec.reference.model.models import load_model
    from specdec.reference.draftmodel.build import build_draft

    target = load_model(path, device=device)
    card = build_draft(target, out, data_config, config, source, alpha_tokens, force=force, progress=not as_json)
    if as_json:
        click.echo(to_json({"out": str(out), **card}))
        return
    d, h, s = card["draft"], card["held_out"], card["seconds"]
    click.echo(f"draft model: {d['layers']} layer(s) from the target's {d['source_layers']}, width "
               f"{d['hidden_size']}, {d['parameters']:,} parameters ({d['trained_parameters']:,} trained) -> {out}")
    click.echo(f"  data: {card['data']['train_tokens']:,} training tokens, {card['data']['held_out']} held-out "
               f"windows ({card['data']['held_out_from']}); {card['training']['steps']} steps")
    click.echo(f"  held-out top-1 {h['untrained']['top1']:.3f} -> {h['trained']['top1']:.3f}, KL "
               f"{h['untrained']['loss']:.3f} -> {h['trained']['loss']:.3f}, beta_topk {h['trained']['beta_topk']:.3f}")
    if card["alpha"]:
        click.echo("  alpha at T = 0: " + ", ".join(f"{w} {r['alpha']:.3f}"
                                                    for w, r in card["alpha"]["workloads"].items()))
    click.echo("  time: " + ", ".join(f"{k} {v:.0f} s" for k, v in s.items()) + f" (seed {seed})")


def target_depth(path: Path) -> int:
    """The target's decoder layers, from its config.json (a refusal for a non-Llama target)."""
    import json

    config = json.loads((Path(path) / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise click.BadParameter(f"the draft model copies a Llama target; this one is {config.get('model_type')!r}",
                                 param_hint="--target")
    return int(config["num_hidden_layers"])


@draft.command()
@click.argument("folder", metavar="DIR", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="The GGUF file to write (atomically).")
@click.option("--force", is_flag=True, help="Replace an existing --out.")
@click.option("--type", "tensor_type", type=click.Choice(["f32", "f16", "q8_0"]), default="f32", show_default=True,
              help="Tensor type of the weight matrices (norms stay float32).")
@click.option("--vocab-from", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A GGUF file of the target whose vocabulary (tokens, merges, special ids, chat template) the file "
                   "gets. Default: the embedded SmolLM2-135M-Instruct's.")
@json_option
def export(folder, out, force, tensor_type, vocab_from, as_json):
    """Write a draft (any Llama model folder) as a GGUF file llama.cpp loads (`llama-server -md FILE`)."""
    import json

    if not out.lower().endswith(".gguf"):
        raise click.BadParameter(f"{out!r}: a GGUF file's name ends in .gguf", param_hint="--out")
    check_creatable(out, "--out")
    if Path(out).exists() and not force:
        raise click.BadParameter(f"{out} exists; pass --force to replace it", param_hint="--out")
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"no readable config.json: {exc}", param_hint="DIR") from None
    if config.get("model_type") != "llama" or not (Path(folder) / "model.safetensors").is_file():
        raise click.BadParameter(f"{folder!r} is not a Llama model folder with model.safetensors", param_hint="DIR")
    if vocab_from is None:
        from specdec.reference.data.default_model import gguf_path
        vocab_from = gguf_path()
    with open(vocab_from, "rb") as f:
        if f.read(4) != b"GGUF":
            raise click.BadParameter(f"{vocab_from!r} is not a GGUF file", param_hint="--vocab-from")
    from specdec.reference.draftmodel.gguf_export import export_gguf, source_problem

    problem = source_problem(folder, vocab_from)  # the card's target, the tokenizer: the same model
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--vocab-from")
    written = export_gguf(folder, out, vocab_from, tensor_type)
    result = {"out": str(written), "type": tensor_type, "bytes": written.stat().st_size, "vocab_from": str(vocab_from)}
    if as_json:
        click.echo(to_json(result))
        return
    click.echo(f"{folder} -> {written} ({tensor_type}, {result['bytes'] / 2**20:.1f} MiB; vocabulary from {vocab_from})")
