"""`specdec eagle`: a feature draft on the target (EAGLE; train it, inspect it).

    specdec eagle train --out DIR [--tokens N] [--ttt 3] ...   self-distil the draft (card + safetensors)
    specdec eagle eval DIR                                    per-depth quality on held-out windows
    specdec eagle trees DIR --workload code                   plan the chain or tree shape (and SGLang's flags)

Use it with `--drafter eagle:DIR` (chains) or `eagle:DIR,tree=N[,topk=K]` (EAGLE-2 trees) in
decode, estimate, validate, serve-bench and bild. docs/eagle.md.
"""
from __future__ import annotations

import click

from specdec.cli.common import (GAMMAS, MAX_DRAFT_VOCAB, MAX_SEED, backend_option, device_option, json_option,
                                preflight_prompts, preflight_target, target_option, training_data_options)
from specdec.cli.types import Number, NumberList, Workloads
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
@click.option("--vocab", "vocab_size", type=Number(int, 1, MAX_DRAFT_VOCAB), default=8192, show_default=True,
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
@click.option("--fuse-layers", "fuse_layers", default="", metavar="eagle3|I,J,...",
              help="EAGLE-3's feature fusion: the committed entries also read the target's hidden states after "
                   "these decoder layers ('eagle3': 2, L // 2, L - 3, the engines' default); default: none.")
@click.option("--draft-layers", type=Number(int, 1, 8), default=1, show_default=True,
              help="Decoder layers in the draft (EAGLE's and the engines' default: one; each adds its cost to c).")
@device_option
@json_option
def train(target_path, out, force, tokens, aligned_tokens, sampled_from, code_tokens, window, vocab_size, ttt,
          feature_weight, epochs, lr, seed, fuse_layers, draft_layers, device, as_json):
    """Train the feature draft on the frozen target by self-distillation and save it with a card
    naming the target (a hash of its weights), the data, the seed and the held-out quality per depth."""
    from specdec.cli.common import preflight_training

    if window <= ttt + 1:
        raise click.BadParameter(f"must exceed --ttt + 1 = {ttt + 1}", param_hint="--window")
    path, data_config = preflight_training(target_path, out, force, tokens, aligned_tokens, sampled_from, code_tokens,
                                           window)
    fuse = fuse_option(fuse_layers, path)
    from specdec.reference.eagle.train import EagleTrainConfig  # torch: after --out is checked
    config = EagleTrainConfig(ttt=ttt, vocab=vocab_size, feature_weight=feature_weight, epochs=epochs, lr=lr,
                              seed=seed, fuse=fuse, draft_layers=draft_layers)
    from specdec.reference.model.models import load_model
    from specdec.reference.eagle.build import build_eagle

    target = load_model(path, device=device)
    card = build_eagle(target, out, data_config, config, force=force, progress=not as_json)
    if as_json:
        click.echo(to_json({"out": str(out), **card}))
        return
    fused = f", fusing the target's layers {', '.join(map(str, card['fuse_layers']))}" if card["fuse_layers"] else ""
    from specdec.reference.eagle.model import EagleDraft

    click.echo(f"feature draft: {EagleDraft.depth_text(card['draft_layers'])}{fused}, {card['trained_parameters']:,} trained parameters, on "
               f"{card['target']['name']} -> {out}")
    d, s = card["data"], card["seconds"]
    click.echo(f"  data: {d['train_tokens']:,} training tokens, {d['held_out']} held-out windows "
               f"({d['held_out_from']}); vocabulary {card['vocab']} ids, covering "
               f"{card['vocab_coverage_held_out']:.1%} of held-out target argmaxes")
    click.echo(f"  time: text {s['text']:.0f} s, target passes {s['distill']:.0f} s, training {s['train']:.0f} s, "
               f"total {s['total']:.0f} s (seed {seed})")
    print_depths(card["held_out"])


def fuse_option(text: str, path) -> tuple[int, ...]:
    """--fuse-layers read against the target's config.json (no model loaded)."""
    import json
    from pathlib import Path
    from types import SimpleNamespace

    from specdec.reference.eagle.model import check_fuse, eagle3_layers

    config = SimpleNamespace(**json.loads((Path(path) / "config.json").read_text()))
    if text.strip().lower() == "eagle3":
        return eagle3_layers(config)
    try:
        layers = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"'eagle3' or decoder layer numbers separated by commas, got {text!r}",
                                 param_hint="--fuse-layers") from None
    try:
        check_fuse(config, layers)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc).removeprefix("--fuse-layers: "), param_hint="--fuse-layers") from None
    return layers


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
    from specdec.reference.model.models import load_model
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.eagle.store import load_eagle
    from specdec.reference.eagle.train import evaluate as evaluate_draft
    from specdec.reference.heads.data import distill

    target = load_model(path, device=device)
    draft, _ = load_eagle(eagle_path, target.model, target.path)
    windows, _ = held_out_prompts(n_windows, window, path)
    rows = evaluate_draft(draft, distill(target.model, windows, progress=not as_json, layer_ids=draft.layers), depth)
    if as_json:
        click.echo(to_json({"eagle": str(eagle_path), "windows": n_windows, "window": window, "held_out": rows}))
        return
    click.echo(f"feature draft {eagle_path}: {n_windows} held-out corpus windows of {window}")
    print_depths(rows)


@eagle.command()
@click.argument("eagle_path", metavar="PATH", type=click.Path(exists=True))
@target_option
@backend_option
@click.option("--workload", "workloads", type=Workloads(), default=("code",), show_default="code",
              metavar="NAME[,NAME]|all", help="Embedded workloads to plan for, one plan each (chat template applied).")
@click.option("--prompts", type=Number(int, 1, 1000), default=5, show_default=True,
              help="Held-out prompts per workload whose greedy continuations are studied.")
@click.option("--new-tokens", type=Number(int, 4, 4096), default=32, show_default=True,
              help="Tokens of each continuation studied.")
@click.option("--depths", type=GAMMAS, default="2,3,4", show_default=True, help="Draft depths (chain lengths).")
@click.option("--topks", type=NumberList(int, 1, 16, distinct=True, what="top-k values"), default="1,2,3",
              show_default=True, help="Children per expanded node; 1: chains.")
@click.option("--nodes", type=NumberList(int, 2, 64, distinct=True, what="node budgets"), default="4,6,10",
              show_default=True, help="Draft nodes per tree (trees only; a budget larger than a shape's candidates "
                                      "is skipped).")
@click.option("--temperature", type=Number(float, 0, 100), default=0.0, show_default=True,
              help="Sampling temperature planned for: 0 studies the greedy text; > 0 the target's sampled text, "
                   "one target pass per position and shape (trees verified by recursive rejection).")
@click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
              help="Seeds the sampled continuations and chains (T > 0).")
@json_option
def trees(eagle_path, target_path, backend, workloads, prompts, new_tokens, depths, topks, nodes, temperature, seed,
          as_json):
    """Plan the feature draft's shape per workload: chains and EAGLE-2 trees (depth, top-k, node
    budget) studied on the target's continuations of held-out prompts at --temperature (tokens per
    pass, drafting time), the target's verify step with N draft nodes timed, the predicted speedup
    of each (`specdec.simulator.trees`), best first, with the drafter spec and SGLang's flags."""
    from specdec.reference.eagle.store import read_card
    from specdec.reference.eagle.tree_study import Shape, candidates

    path, limit = preflight_target(target_path, "the feature draft")
    try:
        read_card(eagle_path)
    except (OSError, SpecdecError) as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    shapes = [Shape(d) for d in depths if 1 in topks] + [
        Shape(d, n, k) for d in depths for k in topks if k > 1 for n in nodes if candidates(Shape(d, n, k)) >= n]
    if not shapes:
        raise click.BadParameter("no shape: give top-k 1 (chains) or a node budget a tree can fill",
                                 param_hint="--nodes")
    from specdec.reference.data.prompts import PromptSource

    encoded = {w: preflight_prompts(path, prompts, PromptSource(workloads=(w,))).ids for w in workloads}
    for workload, ids in encoded.items():  # the continuations, and the verify step timed after the first prompt
        need = max(max(len(p) for p in ids) + new_tokens + max(depths) + 1,
                   len(ids[0]) + new_tokens // 2 + max(s.nodes or s.depth for s in shapes) + 2)
        if limit is not None and need > limit:
            raise click.BadParameter(f"{workload}: the prompts plus --new-tokens and the draft need {need} positions, "
                                     f"the target has {limit}", param_hint="--new-tokens")
    from specdec.engines.configs import sglang_tree
    from specdec.reference.model.models import load_model
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.eagle.tree_study import plan_shapes

    from specdec.reference.core.sampling import SamplingConfig

    target = load_model(path, backend=backend)
    report = {"eagle": str(eagle_path), "backend": target.backend, "prompts": prompts, "new_tokens": new_tokens,
              "temperature": temperature, "seed": seed, "workloads": {}}
    for workload, ids in encoded.items():
        plan, rows, steps = plan_shapes(target, make_drafter(f"eagle:{eagle_path}", target)[0], ids, new_tokens,
                                        shapes, SamplingConfig(temperature), seed)
        studied = {r["method"]: r for r in rows}
        planned = [{**{k: studied[r.method][k] for k in ("method", "depth", "nodes", "topk", "draft_ms",
                                                           "positions")},
                    "block_efficiency": r.block_efficiency, "tree_tokens": r.tree_tokens,
                    "iteration_ms": r.iteration_ms, "predicted_speedup": r.predicted_speedup} for r in plan.rows]
        best = planned[0]
        shape = Shape(best["depth"], best["nodes"], best["topk"])
        report["workloads"][workload] = {
            "verify_step_ms": {str(n): 1000 * t for n, t in steps.items()}, "plan": planned,
            "speculate": best["predicted_speedup"] > 1.0,
            "best": {"drafter": shape.spec(str(eagle_path)), "gamma": shape.depth,
                     "sglang": sglang_tree(shape.depth, shape.topk, shape.nodes or shape.depth)}}
    if as_json:
        click.echo(to_json(report))
        return
    for workload, r in report["workloads"].items():
        text = "greedy tokens" if temperature == 0 else f"tokens sampled at T = {temperature:g}"
        click.echo(f"# {workload}: {prompts} held-out prompts x {new_tokens} {text}, backend {target.backend}; "
                   "verify step ms " + ", ".join(f"N={n}: {t:.1f}" for n, t in r["verify_step_ms"].items()))
        click.echo("| shape | tokens per pass | draft nodes | drafting ms | iteration ms | predicted speedup |")
        click.echo("|---|---|---|---|---|---|")
        for row in r["plan"]:
            click.echo(f"| {row['method']} | {row['block_efficiency']:.3f} | {row['tree_tokens']:.1f} | "
                       f"{row['draft_ms']:.1f} | {row['iteration_ms']:.1f} | {row['predicted_speedup']:.2f}x |")
        b = r["best"]
        if r["speculate"]:
            click.echo(f"best: --drafter {b['drafter']} --gamma {b['gamma']}; SGLang: {b['sglang']['flags']}")
        else:
            click.echo(f"no shape beats plain decoding here (best {r['plan'][0]['predicted_speedup']:.2f}x: "
                       f"{r['plan'][0]['method']}): leave speculative decoding off")
