"""Wall time of one alpha estimate with 1 and N processes (torchrun), paired and alternating,
with the same total number of threads for each (threads per process = --threads / N), and a
check that every run gives the identical estimate.

    python benchmarks/bench_distributed.py --processes 1,2 --threads 2 --repeats 2 -- \\
        --drafter lookup --temperature 1 --tokens 2560 --new-tokens 64 --batch-size 4

Everything after `--` goes to `specdec estimate` (--json and --no-timing are added). Prints a
table and, with --json-out, writes the raw runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAME = ("alpha", "alpha_ci", "n_positions", "prompts", "beta_quantiles", "beta_histogram", "alpha_lenience",
        "beta_mean_per_prompt")


def run(processes: int, threads: int, args: list[str]) -> tuple[float, dict]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
                 "-m", "specdec"] if processes > 1 else [sys.executable, "-m", "specdec"])
    start = time.perf_counter()
    done = subprocess.run(launcher + ["estimate", *args, "--json", "--no-timing"], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{processes} process(es) failed:\n{done.stderr[-2000:]}")
    return wall, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2", help="process counts to compare (the first is the reference)")
    parser.add_argument("--threads", type=int, default=2, help="total threads, split evenly over the processes")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json-out", default=None)
    parser.add_argument("estimate_args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    counts = [int(p) for p in opts.processes.split(",")]
    args = [a for a in opts.estimate_args if a != "--"]
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    for r in range(opts.repeats):
        for n in (counts if r % 2 == 0 else counts[::-1]):  # alternate the order: drift hits both alike
            wall, report = run(n, max(1, opts.threads // n), args)
            runs[n].append({"wall_seconds": wall, "alpha_seconds": report["alpha_seconds"],
                            "per_rank": report["processes"]["per_rank"], **{k: report.get(k) for k in SAME}})
            print(f"repeat {r}: {n} process(es) x {max(1, opts.threads // n)} thread(s): {wall:.1f} s "
                  f"(alpha part {report['alpha_seconds']:.1f} s)", file=sys.stderr, flush=True)
    reference = runs[counts[0]][0]
    identical = all(run_[k] == reference[k] for n in counts for run_ in runs[n] for k in SAME)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{opts.threads} threads in all; estimate {' '.join(args)}")
    print(f"alpha {reference['alpha']:.6f} over {reference['n_positions']} positions; identical in every run: "
          f"{identical}")
    print("processes  threads/proc  wall s (min)  alpha part s (min)  speedup (alpha part, paired medians)")
    for n in counts:
        walls = sorted(x["wall_seconds"] for x in runs[n])
        parts = sorted(x["alpha_seconds"] for x in runs[n])
        ratios = sorted(b["alpha_seconds"] / x["alpha_seconds"] for b, x in zip(runs[counts[0]], runs[n]))
        print(f"{n:9d}  {max(1, opts.threads // n):12d}  {walls[0]:12.1f}  {parts[0]:18.1f}  "
              f"{ratios[len(ratios) // 2]:.2f}x")
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps({"args": args, "threads": opts.threads, "runs": runs,
                                                   "identical": identical}, indent=1))
    if not identical:
        sys.exit("the estimates differ between process counts")


if __name__ == "__main__":
    main()
