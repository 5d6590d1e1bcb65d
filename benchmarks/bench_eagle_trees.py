"""The feature draft's chains against its EAGLE-2 dynamic trees (and the heads), per workload, at
temperatures 0 and 1, on the default target: tokens per target pass and the measured speedup.

Every method decodes the same held-out prompts of each workload (chat template applied, as
`specdec validate` does) through the one comparison harness (methods interleaved per prompt, the
order rotated); the speedup is the harness's (seconds per token of the baseline / the method's,
95% bootstrap interval over the paired runs). Trees are verified at T = 1 by recursive rejection
over siblings (exact: tests/test_eagle.py). Usage:
    .venv/bin/python benchmarks/bench_eagle_trees.py --eagle .cache/eagle/main --heads .cache/heads/main \
        [--workloads code,edit,chat] [--prompts 5] [--new-tokens 24] [--target-backend auto]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from specdec.reference.core.models import load_model
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.target import TargetScorer
from specdec.reference.data.prompts import PromptSource, load_prompt_set
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.measure.harness import Decoding, baseline, measure
from specdec.reference.measure.speedup import speedup


def methods(target, eagle: str, heads: str | None) -> list[Decoding]:
    """(label, drafter spec, gamma): chains of 2 and 3, trees of 4 nodes (top-2) at depth 2, of 6
    nodes (top-2) at depth 3 and of 10 nodes (top-3) at depth 4, and the heads' chain of 2."""
    rows = [("eagle g=2", f"eagle:{eagle}", 2), ("eagle g=3", f"eagle:{eagle}", 3),
            ("eagle tree N=4 K=2 d=2", f"eagle:{eagle},tree=4,topk=2", 2),
            ("eagle tree N=6 K=2 d=3", f"eagle:{eagle},tree=6,topk=2", 3),
            ("eagle tree N=10 K=3 d=4", f"eagle:{eagle},tree=10,topk=3", 4)]
    if heads:
        rows.append(("heads g=2", f"heads:{heads}", 2))
    return [baseline()] + [Decoding(label, make_drafter(spec, target)[0], gamma) for label, spec, gamma in rows]


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
    print("| workload | T | method | tokens per pass | measured speedup [95% CI] |")
    print("|---|---|---|---|---|")
    for workload in args.workloads.split(","):
        source = PromptSource(workloads=(workload,))
        prompts = load_prompt_set(target.tokenizer, target.path, args.prompts, source).ids
        for temperature in (float(t) for t in args.temperatures.split(",")):
            runs = measure(methods(target, args.eagle, args.heads), scorer, prompts, args.new_tokens,
                           SamplingConfig(temperature), seed=1, fuse_prefill=True, warm_up=4)
            base = runs["baseline"]
            for name, rs in runs.items():
                if name == "baseline":
                    continue
                passes = sum(r.stats.iterations for r in rs)
                per_pass = sum(r.stats.new_tokens for r in rs) / passes
                s = speedup(base, rs, np.random.default_rng(0))
                print(f"| {workload} | {temperature:g} | {name} | {per_pass:.2f} | {s.speedup:.2f}x "
                      f"[{s.ci[0]:.2f}, {s.ci[1]:.2f}] |", flush=True)
    print(f"# {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
