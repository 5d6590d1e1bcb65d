"""How well t(k) at an untimed context length is predicted by interpolating between timed ones
(`specdec.simulator.context`, what `specdec plan --context` uses): times t(1..K) at the grid
lengths and at check lengths in one interleaved session (`time_contexts`), then compares each
check length's measured t(k) and v(k) with the interpolation from the grid alone.

    python benchmarks/bench_context.py                       # the embedded target, CPU
    python benchmarks/bench_context.py --grid 32,512,2048 --check 128,1024,1536 --device cuda

Tokens are real held-out text (the continue workload's prompts, repeated to length).
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch


def _lengths(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=Path, default=None, help="model folder (default: the embedded SmolLM2)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--grid", default="32,256,1024,2048", help="timed lengths the interpolation uses")
    ap.add_argument("--check", default="128,512,1536", help="lengths the interpolation predicts (also timed)")
    ap.add_argument("--max-k", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON here")
    args = ap.parse_args()

    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.estimate.timing import time_contexts
    from specdec.simulator.context import check_context_times

    grid, check = _lengths(args.grid), _lengths(args.check)
    if args.target is None:
        from specdec.reference.data.default_model import default_target_path
        args.target = default_target_path()
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.float32).to(args.device).eval()
    prompts, _ = held_out_prompts(40, 64, args.target)
    tokens = [t for p in prompts for t in p]
    lengths = sorted(set(grid) | set(check))
    start = time.perf_counter()
    timings = dict(zip(lengths, time_contexts(model, tokens, lengths, args.max_k, args.repeats)))
    seconds = time.perf_counter() - start
    table = check_context_times(grid, [timings[n].seconds for n in grid])
    ks = [k for k in (1, 2, 3, 5, 9, 16) if k <= args.max_k]
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or platform.machine()
    print(f"{name}, {torch.get_num_threads()} threads, {args.repeats} repeats, {seconds:.0f} s; grid {grid}")
    print("measured t(k) ms by context:")
    print("     L " + " ".join(f"{'k=' + str(k):>8s}" for k in ks))
    for n in lengths:
        print(f"{n:>6d} " + " ".join(f"{1000 * timings[n].seconds[k - 1]:8.2f}" for k in ks)
              + ("   (check)" if n in check and n not in grid else ""))
    rows = []
    print("\n| L | k | t(k) measured ms | interpolated ms | error | v(k) measured | interpolated | error |")
    print("|---|---|---|---|---|---|---|---|")
    for n in check:
        if n in grid or not grid[0] < n < grid[-1]:
            continue
        t_hat, v_hat = table.at(n), table.verify_cost_at(n)
        for k in ks:
            t, v = timings[n].seconds[k - 1], timings[n].verify_cost[k - 1]
            rows.append({"context": n, "k": k, "t": t, "t_interpolated": t_hat[k - 1], "v": v,
                         "v_interpolated": v_hat[k - 1]})
            print(f"| {n} | {k} | {1000 * t:.2f} | {1000 * t_hat[k - 1]:.2f} | {t_hat[k - 1] / t - 1:+.1%} | "
                  f"{v:.3f} | {v_hat[k - 1]:.3f} | {v_hat[k - 1] / v - 1:+.1%} |")
    if rows:
        t_err = [abs(r["t_interpolated"] / r["t"] - 1) for r in rows]
        v_err = [abs(r["v_interpolated"] / r["v"] - 1) for r in rows]
        print(f"\nlargest |error|: t(k) {max(t_err):.1%} (median {np.median(t_err):.1%}), "
              f"v(k) {max(v_err):.1%} (median {np.median(v_err):.1%}) over {len(rows)} (L, k)")
    if args.out is not None:
        args.out.write_text(json.dumps({"device": name, "grid": grid, "check": check, "repeats": args.repeats,
                                        "seconds": {str(n): timings[n].seconds for n in lengths},
                                        "spread": {str(n): timings[n].spread for n in lengths}, "rows": rows},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
