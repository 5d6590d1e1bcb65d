"""`specdec heads`: blockwise parallel draft heads on the target (train them, inspect them).

    specdec heads train --out DIR [--heads 3] [--tokens N] ...   self-distil heads (card + safetensors)
    specdec heads eval DIR [--windows N] ...                       the BPD paper's diagnostics
    specdec heads lattice DIR --ngram PATH ...                     lattice rescoring study (T = 0)

Use trained heads with `--drafter heads:DIR` in decode, estimate, validate and bild.
"""
from __future__ import annotations

from pathlib import Path

import click

from specdec.cli.common import (GAMMAS, MAX_DRAFT_VOCAB, MAX_SEED, backend_option, check_context, device_option,
                                json_option, preflight_target, target_option, training_data_options)
from specdec.cli.outputs import check_creatable
from specdec.cli.types import Number, check_model_path
from specdec.errors import SpecdecError
from specdec.paths import write_atomic
from specdec.reference.model.gguf import is_gguf
from specdec.reference.drafters.spec import split_label
from specdec.strict_json import to_json



@click.group()
def heads() -> None:
    """Blockwise parallel draft heads on the target (Stern et al. 2018; Kim et al. 2024)."""


@heads.command()
@target_option
@click.option("--heads", "n_heads", type=Number(int, 1, 16), default=3, show_default=True,
              help="Draft heads H (the BPD paper's h = H + 1, counting the target's own output layer); "
                   "the heads drafter proposes at most H tokens.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Output folder (heads.safetensors + card.json), built beside it and renamed into place.")
@click.option("--force", is_flag=True, help="Replace heads already in --out (otherwise an error).")
@training_data_options
@click.option("--vocab", "vocab_size", type=Number(int, 1, MAX_DRAFT_VOCAB), default=8192, show_default=True,
              help="Output ids the heads can propose: the ones with the most target probability in the data.")
@click.option("--epochs", type=Number(int, 1, 1000), default=4, show_default=True,
              help="Passes over the training windows.")
@click.option("--lr", type=Number(float, 0, 1, low_open=True), default=2e-3, show_default=True,
              help="Adam learning rate of the heads' residual blocks.")
@click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
              help="Seeds the training: the order of the training positions.")
@device_option
@json_option
def train(target_path, n_heads, out, force, tokens, aligned_tokens, sampled_from, code_tokens, window, vocab_size,
          epochs, lr, seed, device, as_json):
    """Train H heads on the frozen target by self-distillation and save them with a card naming
    the target (a hash of its weights), the data, the seed and the held-out quality per head."""
    from specdec.cli.common import preflight_training

    path, data_config = preflight_training(target_path, out, force, tokens, aligned_tokens, sampled_from, code_tokens,
                                           window)
    from specdec.reference.heads.train import TrainConfig  # torch: after --out is checked
    train_config = TrainConfig(n_heads=n_heads, vocab=vocab_size, epochs=epochs, lr=lr, seed=seed)
    from specdec.reference.model.models import load_model
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


@heads.command(name="eval")
@click.argument("heads_path", metavar="PATH", type=click.Path(exists=True))
@target_option
@click.option("--windows", "n_windows", type=Number(int, 1, 10_000), default=16, show_default=True,
              help="Held-out corpus windows (the split no drafter trains on).")
@click.option("--window", type=Number(int, 8, 4096), default=128, show_default=True,
              help="Tokens per window.")
@click.option("--top", "k", type=Number(int, 1, 1000), default=5, show_default=True,
              help="k of the top-k agreement.")
@device_option
@json_option
def evaluate(heads_path, target_path, n_windows, window, k, device, as_json):
    """The BPD paper's diagnostics of trained heads on held-out text: per-head entropy and h_max
    (its Fig. 2-3), consecutive repetition and max run in the drafts (its Table 3), and top-1 /
    top-k agreement with the target per head."""
    from specdec.reference.heads.store import read_card

    path, limit = preflight_target(target_path, "the heads")
    if limit is not None and window > limit:
        raise click.BadParameter(f"{window} tokens exceed the target's {limit} positions", param_hint="--window")
    try:
        card = read_card(heads_path)
    except (OSError, SpecdecError) as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    if window <= card["n_heads"] + 1:
        raise click.BadParameter(f"must exceed {card['n_heads'] + 1} (the heads + 1)", param_hint="--window")
    from specdec.reference.model.models import load_model
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.heads.diagnostics import diagnose
    from specdec.reference.heads.store import load_heads

    target = load_model(path, device=device)
    heads, _ = load_heads(heads_path, target.model, target.path)
    windows, _ = held_out_prompts(n_windows, window, path)
    d = diagnose(target.model, heads, windows, k)
    if as_json:
        click.echo(to_json({"heads": str(heads_path), **d.to_dict()}))
        return
    click.echo(f"heads {heads_path}: {d.positions} held-out positions ({n_windows} windows of {window})")
    click.echo("  paper head      " + " ".join(f"{j + 1:>7d}" for j in range(len(d.mean_entropy))))
    click.echo("  mean entropy    " + " ".join(f"{e:7.3f}" for e in d.mean_entropy) + "   (nats; head 1 = the target)")
    click.echo("  top-1 agreement " + f"{'-':>7s} " + " ".join(f"{a:7.3f}" for a in d.top1))
    click.echo(f"  top-{k} agreement " + f"{'-':>7s} " + " ".join(f"{a:7.3f}" for a in d.topk))
    click.echo(f"  h_max {d.h_max} (entropy rises monotonically up to that head)")
    click.echo(f"  drafts [y, d_1..d_H]: {d.repetition:.1%} of neighbouring tokens repeat; mean max run {d.max_run:.2f}")


@heads.command()
@click.argument("heads_path", metavar="PATH", type=click.Path(exists=True))
@click.option("--ngram", "ngrams", multiple=True, metavar="[NAME=]PATH",
              help="KenLM model (`specdec ngram build`) to rescore the lattice with; repeat for several.")
@click.option("--lm", "lms", multiple=True, metavar="[NAME=]PATH",
              help="Hugging Face causal LM folder or .gguf file with the target's vocabulary, a local rescorer "
                   "(Algorithm 2); repeat for several.")
@target_option
@click.option("--k", "k", type=Number(int, 1, 64), default=16, show_default=True,
              help="Candidates per head in the rescored lattice.")
@click.option("--p", "ps", default="1,2,4,8,16", show_default=True, type=GAMMAS,
              help="Paths verified together (1: rescoring; > 1: parallel BPD).")
@click.option("--oracle-k", "oracle_ks", default="2,16", show_default=True, type=GAMMAS,
              help="k of the oracle top-k block efficiency.")
@click.option("--prompts", "n_prompts", type=Number(int, 2, 1000), default=10, show_default=True,
              help="Held-out prompts; the first --tune of them tune the interpolation weights.")
@click.option("--tune", type=Number(int, 1, 999), default=2, show_default=True,
              help="The first prompts, which tune the rescorers' weights (the rest are measured).")
@click.option("--prompt-tokens", type=Number(int, 2, 4096), default=64, show_default=True,
              help="Length of each held-out prompt.")
@click.option("--new-tokens", type=Number(int, 2, 4096), default=64, show_default=True,
              help="Greedy target tokens after each prompt (the text the drafts are checked against).")
@click.option("--seed", type=Number(int, 0, MAX_SEED), default=0, show_default=True,
              help="Seeds the bootstrap intervals.")
@click.option("--no-timing", is_flag=True, help="Skip the timings and the plan (block efficiencies only).")
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON result to this file (for benchmarks/bench_lattice.py --study).")
@device_option
@backend_option
@json_option
def lattice(heads_path, ngrams, lms, target_path, k, ps, oracle_ks, n_prompts, tune, prompt_tokens, new_tokens,
            seed, no_timing, save, device, backend, as_json):
    """The BPD paper's lattice study at temperature 0: block efficiency of the base heads, the
    oracle top-k path, n-gram rescoring, parallel BPD and local rescoring (its Tables 4, 9 and
    Fig. 7, with bootstrap intervals), repetition before and after (Table 3) and wins/ties/
    losses against the base drafts (Table 5). Then the plan: each method's predicted speedup
    from its block efficiency, its tree size, the measured verify-cost curve and its drafting
    time, for every method cut to each depth h (`specdec.simulator.trees`; `specdec plan --trees`
    re-plans a saved study with another verify-cost curve)."""
    from specdec.reference.heads.store import read_card

    if tune >= n_prompts:
        raise click.BadParameter(f"must be below --prompts {n_prompts}", param_hint="--tune")
    if save is not None:
        check_creatable(save, "--save")
    path, limit = preflight_target(target_path, "the heads")
    check_context(limit, prompt_tokens + new_tokens, f"--prompt-tokens {prompt_tokens} + --new-tokens {new_tokens}",
                  "--new-tokens")
    try:
        read_card(heads_path)
    except (OSError, SpecdecError) as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    labelled = [split_label(spec) for spec in ngrams]
    for _, ngram_path in labelled:
        if not Path(ngram_path).exists():
            raise click.BadParameter(f"{ngram_path}: no such file or folder", param_hint="--ngram")
    lm_paths = [split_label(spec) for spec in lms]
    for _, lm_path in lm_paths:
        try:
            check_model_path(lm_path)  # a .gguf file's header
        except (OSError, SpecdecError) as exc:
            raise click.BadParameter(str(exc), param_hint="--lm") from None
        if not (is_gguf(lm_path) or Path(lm_path).is_dir()):
            raise click.BadParameter(f"{lm_path}: no such model folder", param_hint="--lm")
    from specdec.ngram.model import NgramModel
    from specdec.reference.model.models import load_model
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.heads.lattice import study
    from specdec.reference.heads.store import load_heads

    target = load_model(path, device=device, backend=backend)
    heads, _ = load_heads(heads_path, target.model, target.path)
    if target.backend == "fast":  # the heads run as the drafter runs them
        from specdec.reference.model.backend import use_backend
        use_backend(heads, "fast")
    models = {name: NgramModel.load(p, target.vocab_size) for name, p in labelled}
    rescorers = {}
    if lm_paths:
        from specdec.reference.model.models import check_pair
        from specdec.reference.heads.lm_rescorer import LMRescorer
        for name, lm_path in lm_paths:
            lm = load_model(lm_path, device=device, backend=backend)
            check_pair(target, lm)
            rescorers[name] = LMRescorer(lm.model, target.vocab_size)
    prompts, _ = held_out_prompts(n_prompts, prompt_tokens, path)
    samples = generate_continuations(target.model, prompts, new_tokens, SamplingConfig(0.0), None, progress=True)
    result = study(target.model, heads, samples, models, k, ps, oracle_ks, tune, seed, rescorers)
    if not no_timing:
        import math

        from specdec.reference.core.progress import phase
        from specdec.reference.estimate.timing import model_bytes
        from specdec.reference.heads.tree_plan import heads_pass_seconds, verify_step_seconds
        from specdec.report import tree_rows
        from specdec.simulator.trees import plan_trees

        sizes = sorted({0} | {n for r in result["by_depth"] if r["tree_tokens"] is not None
                              for n in (math.floor(r["tree_tokens"]), math.ceil(r["tree_tokens"]))})
        phase(f"timing verify steps with {', '.join(map(str, sizes))} draft nodes and the heads' pass")
        context = samples.sequences()[0][:prompt_tokens + new_tokens // 2]
        result["verify_step_ms"] = {str(n): 1000 * s for n, s in
                                    verify_step_seconds(target.model, context, sizes, heads.n_heads).items()}
        result["heads_pass_ms"] = 1000 * heads_pass_seconds(heads, k, evict_bytes=model_bytes(target.model))
        steps = {int(n): s / 1000 for n, s in result["verify_step_ms"].items()}
        result["plan"] = tree_rows(plan_trees(result["by_depth"], steps, result["heads_pass_ms"] / 1000))
    result["rescorers"] = {name: ("ngram", p) for name, p in labelled} | {name: ("lm", p) for name, p in lm_paths}
    if save is not None:
        from specdec.costfiles import KIND_LATTICE_STUDY
        write_atomic(Path(save), to_json({"kind": KIND_LATTICE_STUDY, "heads_path": str(heads_path), **result},
                                         indent=2) + "\n")
    if as_json:
        click.echo(to_json({"heads_path": str(heads_path), **result}))
        return
    click.echo(f"lattice study: {result['blocks']} blocks on {result['prompts']} held-out prompts (greedy target text), "
               f"{result['heads']} heads, top-{k} lattice; weights tuned on {tune} prompts: "
               + (", ".join(f"{n} {w:g}" for n, w in result["weights"].items()) or "no n-gram"))
    click.echo("| method | block efficiency | 95% CI | vs base |\n|---|---|---|---|")
    for r in result["block_efficiency"]:
        click.echo(f"| {r['method']} | {r['block_efficiency']:.3f} | [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | "
                   f"{100 * r['relative']:+.1f}% |")
    click.echo("\n| drafts | consecutive repetition | mean max run |\n|---|---|---|")
    for r in result["repetition"]:
        click.echo(f"| {r['method']} | {100 * r['consecutive_repetition']:.1f}% | {r['max_run']:.2f} |")
    if result.get("plan"):
        click.echo(f"\nplan (baseline step {result['verify_step_ms']['0']:.1f} ms, heads pass "
                   f"{result['heads_pass_ms']:.2f} ms):")
        from specdec.report import tree_table
        click.echo(tree_table(result["plan"]))
    if result["wins"]:
        click.echo("\n| vs base | wins | ties | losses | wins by repair | losses by regress |\n|---|---|---|---|---|---|")
        for r in result["wins"]:
            click.echo(f"| {r['method']} | {100 * r['wins']:.1f}% | {100 * r['ties']:.1f}% | {100 * r['losses']:.1f}% | "
                       f"{100 * r['repair']:.1f}% | {100 * r['regress']:.1f}% |")

