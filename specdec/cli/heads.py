"""`specdec heads`: blockwise parallel draft heads on the target (train them, inspect them).

    specdec heads train --out DIR [--heads 3] [--tokens N] ...   self-distil heads (card + safetensors)
    specdec heads eval --heads-path DIR [--prompts N] ...         the BPD paper's diagnostics

Use trained heads with `--drafter heads:DIR` in decode, estimate, validate and bild.
"""
from __future__ import annotations

from pathlib import Path

import click

from specdec.cli.common import (MAX_SEED, in_range, json_option, positive, preflight_target, to_json)

device_option = click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N")


@click.group()
def heads() -> None:
    """Blockwise parallel draft heads on the target (Stern et al. 2018; Kim et al. 2024)."""


@heads.command()
@click.option("--target", "target_path", type=click.Path(file_okay=False), default=None,
              help="Target model folder. Default: the embedded SmolLM2-135M-Instruct.")
@click.option("--heads", "n_heads", type=int, default=3, show_default=True, callback=in_range(1, 16),
              help="Draft heads H (the BPD paper's h = H + 1, counting the target's own output layer); "
                   "the heads drafter proposes at most H tokens.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (heads.safetensors + card.json), built beside it and renamed into place.")
@click.option("--force", is_flag=True, help="Replace heads already in --out (otherwise an error).")
@click.option("--tokens", type=int, default=49_152, show_default=True, callback=positive,
              help="Teacher-forced training tokens in all (target samples + corpus windows).")
@click.option("--aligned-tokens", type=int, default=16_000, show_default=True, callback=in_range(0),
              help="Of them, the target's own sampled continuations (the cached aligned corpus; 0: corpus only).")
@click.option("--window", type=int, default=128, show_default=True, callback=in_range(8, 4096),
              help="Tokens per training window.")
@click.option("--vocab", "vocab_size", type=int, default=8192, show_default=True, callback=positive,
              help="Output ids the heads can propose: the ones with the most target probability in the data.")
@click.option("--epochs", type=int, default=4, show_default=True, callback=in_range(1, 1000))
@click.option("--lr", type=float, default=2e-3, show_default=True, callback=in_range(0, 1, low_open=True))
@click.option("--seed", type=int, default=0, show_default=True, callback=in_range(0, MAX_SEED))
@device_option
@json_option
def train(target_path, n_heads, out, force, tokens, aligned_tokens, window, vocab_size, epochs, lr, seed, device,
          as_json):
    """Train H heads on the frozen target by self-distillation and save them with a card naming
    the target (a hash of its weights), the data, the seed and the held-out quality per head."""
    from specdec.reference.heads.build import DataConfig
    from specdec.reference.heads.train import TrainConfig

    path, limit = preflight_target(target_path)
    if limit is not None and window > limit:
        raise click.BadParameter(f"{window} tokens exceed the target's {limit} positions", param_hint="--window")
    folder = Path(out)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
        raise click.BadParameter(f"{out} already holds files; pass --force to replace them", param_hint="--out")
    try:
        data_config = DataConfig(tokens=tokens, aligned_tokens=min(aligned_tokens, tokens), window=window)
    except ValueError:
        raise click.BadParameter(f"needs at least {window * 17} tokens (16 held-out windows + 1)",
                                 param_hint="--tokens") from None
    train_config = TrainConfig(n_heads=n_heads, vocab=vocab_size, epochs=epochs, lr=lr, seed=seed)
    from specdec.reference.core.models import load_model
    from specdec.reference.heads.build import build_heads

    target = load_model(path, device=device)
    card = build_heads(target, out, data_config, train_config, force=force, progress=not as_json)
    if as_json:
        click.echo(to_json({"out": str(out), **card}))
        return
    click.echo(f"heads: {card['n_heads']} on {card['target']['name']} -> {out}")
    d = card["data"]
    click.echo(f"  data: {d['train_tokens']:,} training tokens ({d['sampled_windows']} target-sampled + "
               f"{d['corpus_windows']} corpus windows of {d['window']}), {d['held_out']} held-out windows "
               f"({d['held_out_from']}); vocabulary {card['vocab']} ids, covering "
               f"{card['vocab_coverage_held_out']:.1%} of held-out target argmaxes")
    s = card["seconds"]
    click.echo(f"  time: text {s['text']:.0f} s, target passes {s['distill']:.0f} s, training {s['train']:.0f} s, "
               f"total {s['total']:.0f} s (seed {seed})")
    click.echo("  held-out, per head (offset i: the token i after the target's own next token):")
    click.echo("    head   loss   top-1   top-5   beta_topk")
    for r in card["held_out"]:
        click.echo(f"    {r['head']:>4}  {r['loss']:5.2f}  {r['top1']:6.3f}  {r['top5']:6.3f}  {r['beta_topk']:8.3f}")
