"""The feature draft's matrices in float32 (torch's F.linear) against bfloat16 panels (the fast
kernel's, `eagle:DIR,weights=bf16`), paired, on this CPU:

1. one product of each of the draft's matrix shapes (the restricted output layer 8192 x d, the
   MLP's 3d x d and d x 3d for SmolLM2's d = 576) at 1 and 3 rows, each after a cache eviction
   sized to a target pass (as in decoding, where the draft runs right after a target pass),
   median over --rounds, all variants interleaved: F.linear fp32, the kernel's fp32 panels,
   its bfloat16 panels;
2. with --eagle DIR, the drafting cycle of that trained draft (`time_draft_steps`: propose gamma
   + commit from a real code prompt, cold caches) with weights=fp32 and weights=bf16, both in
   each round in alternating order: medians and the median of the per-round ratios.

End-to-end speedups and alpha of both: `specdec validate --drafter f32=eagle:DIR,weights=fp32
--drafter b16=eagle:DIR,weights=bf16 ...`. Usage:
    .venv/bin/python benchmarks/bench_draft_weights.py [--eagle DIR] [--gammas 1,2,3,4,8] [--rounds 7]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F

from specdec.reference.model.kernel_build import kernel
from specdec.reference.estimate.timing import CacheEvictor


def products(rounds: int, evict) -> None:
    k = kernel()
    gen = torch.Generator().manual_seed(0)
    print("| matrix (out x in) | rows | F.linear fp32 ms | fp32 panels ms | bf16 panels ms | bf16 panels / F.linear |")
    print("|---|---|---|---|---|---|")
    for out_dim, in_dim in ((8192, 576), (1536, 576), (576, 1536)):
        w = torch.randn(out_dim, in_dim, generator=gen)
        p32, p16 = k.pack(w), k.pack(w, True)
        for rows in (1, 3):
            x = torch.randn(rows, in_dim, generator=gen)
            fns = {"linear": lambda: F.linear(x, w), "fp32": lambda: k.small_linear(x, p32, out_dim),
                   "bf16": lambda: k.small_linear(x, p16, out_dim)}
            seconds = {name: [] for name in fns}
            for _ in range(rounds):
                for name, fn in fns.items():
                    evict()
                    start = time.perf_counter()
                    fn()
                    seconds[name].append(time.perf_counter() - start)
            ms = {name: 1000 * float(np.median(v)) for name, v in seconds.items()}
            print(f"| {out_dim} x {in_dim} | {rows} | {ms['linear']:.3f} | {ms['fp32']:.3f} | {ms['bf16']:.3f} | "
                  f"{ms['bf16'] / ms['linear']:.2f} |", flush=True)


def drafting(eagle: str, gammas: list[int], rounds: int, repeats: int) -> None:
    from specdec.reference.model.models import load_model
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.data.prompts import PromptSource, load_prompt_set
    from specdec.reference.drafters.factory import make_drafter
    from specdec.reference.estimate.timing import time_draft_steps

    target = load_model(None, backend="auto")
    tokens = load_prompt_set(target.tokenizer, target.path, 1, PromptSource(workloads=("code",))).ids[0]
    drafters = {w: make_drafter(f"eagle:{eagle},weights={w}", target)[0] for w in ("fp32", "bf16")}
    greedy = SamplingConfig(temperature=0.0)
    print(f"\n# drafting cycle, target backend {target.backend}, context {len(tokens)} tokens (code prompt)")
    seconds = {(w, g): [] for w in drafters for g in gammas}
    for r in range(rounds):
        order = list(drafters) if r % 2 == 0 else list(drafters)[::-1]
        for g in gammas:
            for w in order:
                timing = time_draft_steps(drafters[w], target.model, tokens, greedy, context_tokens=len(tokens),
                                          gamma=g, repeats=repeats)
                seconds[(w, g)].append(timing.iteration_seconds)
    print("| gamma | fp32 ms / iteration | bf16 ms / iteration | bf16 / fp32 (median of rounds) |")
    print("|---|---|---|---|")
    for g in gammas:
        f32, b16 = np.array(seconds[("fp32", g)]), np.array(seconds[("bf16", g)])
        print(f"| {g} | {1000 * np.median(f32):.2f} | {1000 * np.median(b16):.2f} | {np.median(b16 / f32):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eagle", default=None, help="a trained feature draft's folder (part 2)")
    parser.add_argument("--gammas", default="1,2,3,4,8")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=15, help="timed drafting cycles per (round, gamma, weights)")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} "
          f"threads, kernel {kernel().lanes()} floats per vector, {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    products(max(args.rounds, 15), CacheEvictor(torch.device("cpu"), 600 << 20))
    if args.eagle:
        drafting(args.eagle, [int(g) for g in args.gammas.split(",")], args.rounds, args.repeats)


if __name__ == "__main__":
    main()
