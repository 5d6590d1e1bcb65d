"""Parallel drafts end to end on the default target (issue 14): measured speedup of heads
drafters (single draft, n-gram rescored, parallel p paths verified as one tree) over the
autoregressive baseline, greedy, on held-out corpus prompts, next to the lattice study's
prediction for each (`specdec heads lattice` JSON, optional).

The baseline and the drafters run through the comparison harness
(`specdec.reference.measure.harness.measure`: interleaved per prompt, rotating which goes first,
so the machine's drift hits all alike); the measured speedup is the harness's
(`specdec.reference.measure.speedup.speedup`: baseline seconds per token / the method's, prefill
excluded, with a 95% bootstrap interval over the paired runs). Also checks that every method's
tokens equal the baseline's, and times one tree pass against a chain pass of the same token
count. Usage:
    .venv/bin/python benchmarks/bench_lattice.py --heads .cache/heads/main \\
        --drafter heads=heads:.cache/heads/main --drafter "p4=heads:.cache/heads/main,k=4,p=4" \\
        [--prompts 12] [--new-tokens 32] [--gamma 3] [--study study.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch

from specdec.reference.model.models import load_model
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.model.target import TargetScorer
from specdec.reference.core.tree import trie
from specdec.reference.data.prompts import held_out_prompts
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.drafters.spec import split_label
from specdec.reference.estimate.timing import sync
from specdec.reference.measure.harness import Decoding, Run, baseline, measure
from specdec.reference.measure.speedup import speedup

GREEDY = SamplingConfig(0.0)


def tree_vs_chain(target, context: list[int], paths: list[list[int]], repeats: int = 15) -> tuple[float, float, int]:
    """Median seconds of one tree pass over `paths` and of a chain pass over as many tokens."""
    from specdec.reference.model.kv_session import KVSession

    tokens, parents = trie(paths)
    times = {"tree": [], "chain": []}
    for r in range(repeats + 3):
        for kind in ("tree", "chain") if r % 2 else ("chain", "tree"):
            s = KVSession(target.model)
            s.start(context)
            sync(target.model.device)
            start = time.perf_counter()
            if kind == "tree":
                s.extend_tree(tokens, parents)
            else:
                s.extend(tokens, n_logits=len(tokens) + 1)
            sync(target.model.device)
            if r >= 3:
                times[kind].append(time.perf_counter() - start)
    return float(np.median(times["tree"])), float(np.median(times["chain"])), len(tokens)


def check_outputs(runs: dict[str, list[Run]]) -> None:
    """Greedy: every method's tokens must equal the baseline's, prompt by prompt."""
    for name, mine in runs.items():
        for base, run in zip(runs["baseline"], mine):
            assert run.output == base.output, f"prompt {run.prompt}: {name}'s output differs from the baseline's"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drafter", action="append", required=True, help="[NAME=]SPEC, repeatable")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--skip", type=int, default=0, help="skip the first N prompts (the study's tuning prompts)")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--gamma", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--prompt-ids", help="JSON list of prompts as token-id lists (instead of the held-out corpus)")
    ap.add_argument("--study", help="JSON of `specdec heads lattice --json` whose plan predicts each method")
    ap.add_argument("--predict", action="append", default=[],
                    help="NAME=METHOD[@H]: the study's method (at depth H, default --gamma) for a drafter")
    args = ap.parse_args()
    target = load_model(None, device=args.device, backend="auto")
    drafters = {name: make_drafter(spec, target, args.device)[0] for name, spec in map(split_label, args.drafter)}
    if args.prompt_ids:
        prompts = json.load(open(args.prompt_ids))[:args.prompts]
    else:
        prompts, _ = held_out_prompts(args.prompts, args.prompt_tokens)
    prompts = prompts[args.skip:]
    methods = [baseline()] + [Decoding(name, drafter, args.gamma) for name, drafter in drafters.items()]
    runs = measure(methods, TargetScorer(target.model), prompts, args.new_tokens, GREEDY, warm_up=4)
    check_outputs(runs)
    predictions = {}
    if args.study:
        plan = {(row["method"], row.get("depth")): row for row in json.load(open(args.study)).get("plan", [])}
        for name, spec in (p.split("=", 1) for p in args.predict):
            method, _, depth = spec.partition("@")
            row = plan.get((method, int(depth) if depth else args.gamma))
            if row is not None:
                predictions[name] = row["predicted_speedup"]
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or platform.machine()
    print(f"machine: {where}, {torch.get_num_threads()} threads, backend "
          f"{target.backend}; {len(prompts)} held-out prompts x {args.new_tokens} tokens, gamma {args.gamma}, greedy; "
          "every method's output equals the baseline's")
    print("| drafter | tokens/pass | verified tokens/pass | measured speedup [95% CI] | predicted | error |")
    print("|---|---|---|---|---|---|")
    for name in drafters:
        c = speedup(runs["baseline"], runs[name])
        s = DecodeStats.total([r.stats for r in runs[name]])
        pred = predictions.get(name)
        print(f"| {name} | {s.tokens_per_iteration():.3f} | {s.verified / s.iterations:.2f} | {c.speedup:.3f}x "
              f"[{c.ci[0]:.3f}, {c.ci[1]:.3f}] | " + ("-" if pred is None else f"{pred:.3f}x") + " | "
              + ("-" if pred is None else f"{100 * (pred / c.speedup - 1):+.1f}%") + " |")
    context = prompts[0] + [int(t) for t in prompts[1][:8]]
    for p in (4, 16):
        paths = [[100 + j, 200 + (j % 3), 300 + (j % 5)] for j in range(p)]
        tree, chain, n = tree_vs_chain(target, context, paths)
        print(f"tree pass over {n} nodes: {1000 * tree:.1f} ms; chain pass over {n} tokens: {1000 * chain:.1f} ms "
              f"(tree / chain {tree / chain:.2f})")


if __name__ == "__main__":
    main()
