"""Padded or packed: which layout of a ragged batch's pass is faster on this machine.

Both layouts hold the same B slots of L cached tokens (`specdec.reference.model.ragged_cache`);
each repeat times one pass in each layout, alternating which goes first, of k new tokens
per slot (uniform) or k in every other slot and 1 in the rest (ragged: what padding wastes), so the machine's drift hits both alike; the table gives the medians and their paired
ratio (packed / padded, > 1: padded is faster). Default target, eager.

    python benchmarks/bench_layout.py --batch-sizes 1,4,16 --contexts 128,1024 --ks 1,3,5
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-sizes", default="1,4,16")
    ap.add_argument("--contexts", default="128,1024")
    ap.add_argument("--ks", default="1,3,5")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from specdec.reference.model.batch_scorer import BatchScorer
    from specdec.reference.model.models import load_model
    from specdec.reference.core.seams import Proposal
    from specdec.reference.data.prompts import held_out_prompts

    model = load_model(None, backend="eager").model
    ks = [int(k) for k in args.ks.split(",")]
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"{args.repeats} paired repeats, medians")
    print("| L | B | k | rows | padded ms | packed ms | packed / padded (median of paired ratios) |")
    print("|---|---|---|---|---|---|---|")
    for context in (int(c) for c in args.contexts.split(",")):
        text = held_out_prompts(1, context + max(ks), None)[0][0]
        prompt, drafts = text[:context + 1], text[context + 1:]
        for b in (int(x) for x in args.batch_sizes.split(",")):
            prefixes: dict = {}  # one encoding of the prompt for both layouts
            scorers = {name: BatchScorer(model, b, context + max(ks) + 1, name, prefixes)
                       for name in ("padded", "packed")}
            for s in scorers.values():
                for slot in range(b):
                    s.start(slot, prompt)
            for k, rows in [(k, rows) for k in ks for rows in ("uniform", "ragged") if k > 1 or rows == "uniform"]:
                times = {name: [] for name in scorers}
                long, short = Proposal(torch.tensor(drafts[:k - 1], dtype=torch.long)), Proposal.empty()
                proposals = [long if rows == "uniform" or slot % 2 == 0 else short for slot in range(b)]
                for r in range(args.repeats + 1):
                    order = list(scorers) if r % 2 == 0 else list(scorers)[::-1]
                    for name in order:
                        start = time.perf_counter()
                        scorers[name].score(proposals)
                        if r:
                            times[name].append(time.perf_counter() - start)
                        for slot in range(b):
                            scorers[name].rewind(slot, context + 1)
                pad, pack = (np.array(times[n]) for n in ("padded", "packed"))
                print(f"| {context} | {b} | {k} | {rows} | {1000 * np.median(pad):.1f} | {1000 * np.median(pack):.1f} | "
                      f"{np.median(pack / pad):.2f} |", flush=True)


if __name__ == "__main__":
    main()
