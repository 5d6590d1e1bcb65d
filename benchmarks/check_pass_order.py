"""Does a one-token target pass cost the same right after a k-token pass as in a run of one-token
passes? t(1) is timed interleaved with the k-token passes (`time_contexts`); the baseline decode
and the drift probe run one-token passes back to back. Paired blocks on one KV session, each pass
one call of the decode step (`verify_step`), rewound after it:

    (a) 8 one-token passes back to back;   (b) 8 times: a k-token pass, then a one-token pass.

Prints each block's medians and (b)/(a); a ratio of 1 means the order does not matter. Then
--pairs alternating pairs, each a one-token or a k-token pass (in a random order per pair) then the
timed one-token pass: the paired ratio's median with a bootstrap 95 % interval, drift cancelling
within each pair rather than each block.

    .venv/bin/python benchmarks/check_pass_order.py --target .cache/models/smollm2-wide-1.4b --context 167 --k 9
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default=None, help="model folder or .gguf (default: the embedded target)")
    p.add_argument("--context", type=int, default=167)
    p.add_argument("--k", type=int, default=9)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--pairs", type=int, default=200)
    p.add_argument("--backend", default="auto", choices=("auto", "eager", "fast"))
    a = p.parse_args()
    if a.context < 1 or a.k < 2 or a.blocks < 1 or a.pairs < 0:
        print("check_pass_order: need --context >= 1, --k >= 2, --blocks >= 1, --pairs >= 0", file=sys.stderr)
        return 2
    from specdec.reference.core.step import Request
    from specdec.reference.estimate.timing import verify_step
    from specdec.reference.model.models import load_model

    model = load_model(a.target, backend=a.backend).model
    ids = list(range(1000, 1000 + a.context + a.k))  # the cost of a pass does not depend on the ids
    step = verify_step(model, ids, ids, a.context, a.k)

    def one(k: int) -> float:
        seconds = step([Request(0, k)]).pass_seconds
        step.target.target.rewind(a.context)
        return seconds

    def after_k() -> float:  # a one-token pass right after a k-token pass
        one(a.k)
        return one(1)

    for _ in range(3):
        after_k()
    ratios = []
    for b in range(a.blocks):
        alone = float(np.median([one(1) for _ in range(8)]))
        after = float(np.median([after_k() for _ in range(8)]))
        ratios.append(after / alone)
        print(f"block {b}: back to back {1000 * alone:.1f} ms, after a {a.k}-token pass {1000 * after:.1f} ms, "
              f"ratio {after / alone:.3f}", flush=True)
    print(f"median ratio {np.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
    if a.pairs:
        rng = np.random.default_rng(0)
        timed: dict[int, list[float]] = {1: [], a.k: []}
        for _ in range(a.pairs):
            for before in rng.permutation([1, a.k]):
                one(int(before))
                timed[int(before)].append(one(1))
        paired = np.array(timed[a.k]) / np.array(timed[1])
        boot = [np.median(rng.choice(paired, len(paired))) for _ in range(1000)]
        print(f"{a.pairs} alternating pairs: after a {a.k}-token pass / after a one-token pass, median "
              f"{np.median(paired):.4f} (95 % {np.quantile(boot, 0.025):.4f}-{np.quantile(boot, 0.975):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
