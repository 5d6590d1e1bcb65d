"""`specdec eagle`: a feature draft on the target (EAGLE; train it, inspect it).

    specdec eagle train --out DIR [--tokens N] [--ttt 3] ...   self-distil the draft (card + safetensors)
    specdec eagle eval DIR                                    per-depth quality on held-out windows

Use it with `--drafter eagle:DIR` (chains) or `eagle:DIR,tree=N[,topk=K]` (EAGLE-2 trees) in
decode, estimate, validate, serve-bench and bild. docs/eagle.md.
"""
from __future__ import annotations

import click

from specdec.cli.common import (MAX_SEED, device_option, json_option, preflight_target, target_option,
                                training_data_options)
from specdec.cli.types import POSITIVE, Number
from specdec.errors import SpecdecError
from specdec.strict_json import to_json


@click.group()
def eagle() -> None:
    """A feature draft on the frozen target (EAGLE, Li et al. 2024; EAGLE-2 trees, EAGLE-3's training-time test)."""


@eagle.command()
@target_option
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (eagle.safetensors + card.json), built beside it and renamed into place.")
@click.option("--force", is_flag=True, help="Replace a draft already in --out (otherwise an error).")
@training_data_options
@click.option("--vocab", "vocab_size", type=POSITIVE, default=8192, show_default=True,
              help="Output ids the draft can propose: the ones with the most target probability in the data.")
@click.option("--ttt", type=Number(int, 1, 16), default=3, show_default=True,
              help="Depths of the training-time test (1: the target's features only, EAGLE-1).")
@click.option("--feature-weight", type=Number(float, 0, 100), default=0.0, show_default=True,
              help="Weight of EAGLE-1's feature regression (smooth L1 on the next feature; 0: off).")
@click.option("--epochs", type=Number(int, 1, 1000), default=4, show_default=True, help="Passes over the windows.")
@click.option("--lr", type=Number(float, 0, 1, low_open=True), default=1e-3, show_default=True,
              help="AdamW learning rate.")
@click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
              help="Seeds the initialisation and the order of the windows.")
@device_option
@json_option
def train(target_path, out, force, tokens, aligned_tokens, sampled_from, window, vocab_size, ttt, feature_weight,
          epochs, lr, seed, device, as_json):
    """Train the feature draft on the frozen target by self-distillation and save it with a card
    naming the target (a hash of its weights), the data, the seed and the held-out quality per depth."""
    from specdec.cli.common import preflight_training

    if window <= ttt + 1:
        raise click.BadParameter(f"must exceed --ttt + 1 = {ttt + 1}", param_hint="--window")
    path, data_config = preflight_training(target_path, out, force, tokens, aligned_tokens, sampled_from, window)
    from specdec.reference.eagle.train import EagleTrainConfig  # torch: after --out is checked
    config = EagleTrainConfig(ttt=ttt, vocab=vocab_size, feature_weight=feature_weight, epochs=epochs, lr=lr,
                              seed=seed)
    from specdec.reference.core.models import load_model
    from specdec.reference.eagle.build import build_eagle

    target = load_model(path, device=device)
    card = build_eagle(target, out, data_config, config, force=force, progress=not as_json)
    if as_json:
        click.echo(to_json({"out": str(out), **card}))
        return
    click.echo(f"feature draft: one layer, {card['trained_parameters']:,} trained parameters, on "
               f"{card['target']['name']} -> {out}")
    d, s = card["data"], card["seconds"]
    click.echo(f"  data: {d['train_tokens']:,} training tokens, {d['held_out']} held-out windows "
               f"({d['held_out_from']}); vocabulary {card['vocab']} ids, covering "
               f"{card['vocab_coverage_held_out']:.1%} of held-out target argmaxes")
    click.echo(f"  time: text {s['text']:.0f} s, target passes {s['distill']:.0f} s, training {s['train']:.0f} s, "
               f"total {s['total']:.0f} s (seed {seed})")
    print_depths(card["held_out"])


def print_depths(rows) -> None:
    click.echo("  held-out, per depth (drafts before it taken as the true tokens, the features the draft's own):")
    click.echo("    depth   loss   top-1   top-5   beta_topk")
    for r in rows:
        click.echo(f"    {r['depth']:>5}  {r['loss']:5.2f}  {r['top1']:6.3f}  {r['top5']:6.3f}  {r['beta_topk']:8.3f}")


@eagle.command(name="eval")
@click.argument("eagle_path", metavar="PATH", type=click.Path(exists=True))
@target_option
@click.option("--windows", "n_windows", type=Number(int, 1, 10_000), default=16, show_default=True,
              help="Held-out corpus windows (the split no drafter trains on).")
@click.option("--window", type=Number(int, 8, 4096), default=128, show_default=True, help="Tokens per window.")
@click.option("--depth", type=Number(int, 1, 16), default=6, show_default=True, help="Draft depths reported.")
@device_option
@json_option
def evaluate(eagle_path, target_path, n_windows, window, depth, device, as_json):
    """Per-depth loss, top-1 / top-5 agreement with the target and beta_topk on held-out corpus
    windows (the target's passes over them; acceptance on its own continuations: `specdec
    estimate --drafter eagle:PATH`)."""
    from specdec.reference.eagle.store import read_card

    path, limit = preflight_target(target_path, "the feature draft")
    if limit is not None and window > limit:
        raise click.BadParameter(f"{window} tokens exceed the target's {limit} positions", param_hint="--window")
    if window <= depth + 1:
        raise click.BadParameter(f"must exceed --depth + 1 = {depth + 1}", param_hint="--window")
    try:
        read_card(eagle_path)
    except (OSError, SpecdecError) as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    from specdec.reference.core.models import load_model
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.eagle.store import load_eagle
    from specdec.reference.eagle.train import evaluate as evaluate_draft
    from specdec.reference.heads.data import distill

    target = load_model(path, device=device)
    draft, _ = load_eagle(eagle_path, target.model, target.path)
    windows, _ = held_out_prompts(n_windows, window, path)
    rows = evaluate_draft(draft, distill(target.model, windows, progress=not as_json), depth)
    if as_json:
        click.echo(to_json({"eagle": str(eagle_path), "windows": n_windows, "window": window, "held_out": rows}))
        return
    click.echo(f"feature draft {eagle_path}: {n_windows} held-out corpus windows of {window}")
    print_depths(rows)
