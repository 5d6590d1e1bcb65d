"""The feature draft's chains against its EAGLE-2 dynamic trees (and the heads), per workload, at
temperatures 0 and 1, on the default target: tokens per target pass, the measured speedup, and the
tree plan's prediction of each shape at that temperature and its error.

Every method decodes the same held-out prompts of each workload (chat template applied, as
`specdec validate` does) through the one comparison harness (methods interleaved per prompt, the
order rotated); the speedup is the harness's (seconds per token of the baseline / the method's,
95% bootstrap interval over the paired runs). The prompt is encoded before the timed decode
(no fused prefill, as `specdec validate` decodes): with it inside, every method and the baseline
shared a prompt pass that diluted each speedup toward 1 (code, 155-token prompts, 24 tokens:
1.42x against validate's 1.58x for the same chain) and the draft's first pass drafted nothing,
neither of which the plan models (RESULTS.md, "Trees of the largest draft"). Trees are verified
at T = 1 by recursive rejection over siblings (exact: tests/test_eagle.py).

The plan (`specdec.simulator.trees.plan_trees`) is made before any decode, from other held-out
prompts of the same workload (the next --prompts ones): the shapes' tokens per pass on the
target's own text at that temperature (greedy: exact from the text; T > 0: one target pass per
position and shape, exact node chances) and their drafting times
(`specdec.reference.eagle.tree_study`), and the
target's verify steps with N draft nodes timed at that workload's context
(`specdec.reference.heads.tree_plan.verify_step_seconds`). Two errors are printed: the plan's
(predicted / measured - 1) and its cost model's alone (the prediction rescaled to the decode's
own tokens per pass: what remains once the two prompt sets' acceptance differences are out). Usage:
    .venv/bin/python benchmarks/bench_eagle_trees.py --eagle .cache/eagle/main --heads .cache/heads/main \
        [--workloads code,edit,chat] [--prompts 5] [--new-tokens 24] [--target-backend auto]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from specdec.reference.model.models import load_model
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.data.prompts import PromptSource, load_prompt_set
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.eagle.tree_study import Shape, plan_shapes
from specdec.reference.measure.harness import Decoding, baseline, measure
from specdec.reference.measure.speedup import speedup

SHAPES = (Shape(2), Shape(3), Shape(2, 4, 2), Shape(3, 6, 2), Shape(4, 10, 3))


def methods(target, eagle: str, heads: str | None) -> list[Decoding]:
    """The SHAPES of the feature draft (chains of 2 and 3, trees of 4 nodes (top-2) at depth 2, of
    6 nodes (top-2) at depth 3 and of 10 nodes (top-3) at depth 4), and the heads' chain of 2."""
    rows = [(s.label, s.spec(eagle), s.depth) for s in SHAPES]
    if heads:
        rows.append(("heads g=2", f"heads:{heads}", 2))
    return [baseline()] + [Decoding(label, make_drafter(spec, target)[0], gamma) for label, spec, gamma in rows]


def tree_plan(target, eagle: str, prompts, new_tokens: int, sampling: SamplingConfig):
    """The plan of SHAPES from these prompts at this temperature: {label: planned row} best first,
    the study's rows and the verify steps {N: ms}."""
    plan, rows, steps = plan_shapes(target, make_drafter(f"eagle:{eagle}", target)[0], prompts, new_tokens, SHAPES,
                                    sampling, seed=2)
    return {r.method: r for r in plan.rows}, rows, {n: 1000 * t for n, t in steps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eagle", required=True)
    parser.add_argument("--heads", default=None)
    parser.add_argument("--workloads", default="code,edit,chat")
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--temperatures", default="0,1")
    parser.add_argument("--target-backend", default="auto")
    args = parser.parse_args()
    torch.manual_seed(0)
    target = load_model(backend=args.target_backend)
    scorer = TargetScorer(target.model)
    start = time.time()
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, backend {target.backend}, "
          f"{args.prompts} prompts x {args.new_tokens} tokens per workload, {time.strftime('%Y-%m-%d')}")
    print("| workload | T | method | tokens per pass (plan's prompts) | tokens per pass | predicted | "
          "measured speedup [95% CI] | error | error at the decode's tokens per pass |")
    print("|---|---|---|---|---|---|---|---|---|")
    picks = []
    for workload in args.workloads.split(","):
        source = PromptSource(workloads=(workload,))
        both = load_prompt_set(target.tokenizer, target.path, 2 * args.prompts, source).ids
        prompts, planned_on = both[:args.prompts], both[args.prompts:]
        for temperature in (float(t) for t in args.temperatures.split(",")):
            plan, studied, steps = tree_plan(target, args.eagle, planned_on, args.new_tokens,
                                             SamplingConfig(temperature))
            print(f"# {workload}, T = {temperature:g}: verify steps ms "
                  + ", ".join(f"N={n}: {t:.1f}" for n, t in steps.items()) + "; drafting ms per iteration "
                  + ", ".join(f"{r['method']}: {r['draft_ms']:.1f}" for r in studied)
                  + f"; {studied[0]['positions']} positions", flush=True)
            runs = measure(methods(target, args.eagle, args.heads), scorer, prompts, args.new_tokens,
                           SamplingConfig(temperature), seed=1, fuse_prefill=False, warm_up=4)
            base = runs["baseline"]
            measured = {}
            for name, rs in runs.items():
                if name == "baseline":
                    continue
                passes = sum(r.stats.iterations for r in rs)
                per_pass = sum(r.stats.new_tokens for r in rs) / passes
                s = speedup(base, rs, np.random.default_rng(0))
                measured[name] = s.speedup
                row = plan.get(name)
                planned = (f"{row.block_efficiency:.2f} | {per_pass:.2f} | {row.predicted_speedup:.2f}x"
                           if row else f"n/a | {per_pass:.2f} | n/a")
                error = (f"{100 * (row.predicted_speedup / s.speedup - 1):+.1f}% | "  # the cost model's own share:
                         f"{100 * (row.predicted_speedup * per_pass / row.block_efficiency / s.speedup - 1):+.1f}%"
                         if row else "n/a | n/a")
                print(f"| {workload} | {temperature:g} | {name} | {planned} | {s.speedup:.2f}x "
                      f"[{s.ci[0]:.2f}, {s.ci[1]:.2f}] | {error} |", flush=True)
            pick = next(iter(plan.values()))
            best = max((m for m in measured if m in plan), key=measured.get)
            picks.append((workload, temperature, pick.method, pick.predicted_speedup, measured[pick.method], best,
                          measured[best]))
    print("\n| workload | T | plan's pick | predicted | measured | measured best of the shapes | measured "
          "| regret |")
    print("|---|---|---|---|---|---|---|---|")
    for workload, temperature, pick, predicted, got, best, top in picks:
        print(f"| {workload} | {temperature:g} | {pick} | {predicted:.2f}x | {got:.2f}x | {best} | {top:.2f}x | "
              f"{100 * (top / got - 1):+.1f}% |")
    print(f"# {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
