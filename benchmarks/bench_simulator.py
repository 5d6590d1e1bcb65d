"""Benchmark the simulator: `specdec plan` end to end, and the optimal gamma over a 1000 x 1000 grid.

Names follow Leviathan et al. (2023): alpha acceptance rate, gamma draft tokens, c cost ratio.

Usage:  python benchmarks/bench_simulator.py [--repeats 10]
Prints a Markdown report to stdout; writes nothing.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from specdec.simulator import optimal_gamma, walltime_improvement_by_gamma
from specdec.simulator.optimal import DEFAULT_MAX_GAMMA, OptimalGamma, best_of_table

PLAN_ARGS = ["plan", "--alpha", "0.8", "--c", "0.05", "--json"]
GRID = 1000
CHUNK_ROWS = 100  # grid rows per chunk of the brute-force table (100 x 1000 x 65 floats, 52 MB)


def specdec_command() -> list[str]:
    """The installed console script beside this interpreter, else `python -m specdec`."""
    script = Path(sys.executable).with_name("specdec")
    if script.exists():
        return [str(script)]
    found = shutil.which("specdec")
    return [found] if found else [sys.executable, "-m", "specdec"]


def wall_times(run: Callable[[], object], repeats: int) -> list[float]:
    """Seconds per call of run, one entry per repeat."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def summary(times: list[float]) -> str:
    return f"median {statistics.median(times) * 1e3:.0f} ms (min {min(times) * 1e3:.0f}, max {max(times) * 1e3:.0f})"


def brute_force(alpha: np.ndarray, c: np.ndarray) -> OptimalGamma:
    """Argmax over the full [rows, GRID, max_gamma + 1] table, CHUNK_ROWS alpha rows at a time."""
    shape = np.broadcast_shapes(alpha.shape, c.shape)
    alpha, c = np.broadcast_to(alpha, shape), np.broadcast_to(c, shape)
    gamma, speedup = np.empty(shape, dtype=np.int64), np.empty(shape)
    for start in range(0, shape[0], CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        gamma[rows], speedup[rows] = best_of_table(walltime_improvement_by_gamma(alpha[rows], c[rows]))
    return OptimalGamma(gamma, speedup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    command = specdec_command() + PLAN_ARGS
    env = dict(os.environ)
    python_start = wall_times(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeats)
    plan = wall_times(lambda: subprocess.run(command, check=True, capture_output=True, env=env), args.repeats)

    alpha_axis = np.linspace(0.0, 0.999, GRID)
    c_axis = np.linspace(0.0, 0.5, GRID)
    outer = (alpha_axis[:, None], c_axis[None, :])  # broadcasting [1000, 1] x [1, 1000]
    full = tuple(np.ascontiguousarray(x) for x in np.broadcast_arrays(*outer))  # two dense [1000, 1000]
    fast_outer = wall_times(lambda: optimal_gamma(*outer), args.repeats)
    fast_full = wall_times(lambda: optimal_gamma(*full), args.repeats)
    brute_full = wall_times(lambda: brute_force(*full), max(1, args.repeats // 3))
    fast, brute = optimal_gamma(*full), brute_force(*full)
    same = np.isclose(fast.walltime_improvement, brute.walltime_improvement, rtol=1e-12, atol=0).mean()

    print(f"# Simulator benchmark\n\nmachine: {platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}\n")
    print(f"## `{' '.join(['specdec'] + PLAN_ARGS)}` end to end ({args.repeats} runs, subprocess)\n")
    print(f"- plan: {summary(plan)}")
    print(f"- bare `python -c pass` for comparison: {summary(python_start)}\n")
    print(f"## Optimal gamma over a {GRID} x {GRID} (alpha, c) grid, max_gamma = {DEFAULT_MAX_GAMMA}\n")
    print(f"- `optimal_gamma` (binary search), broadcast [{GRID},1] x [1,{GRID}]: {summary(fast_outer)}")
    print(f"- `optimal_gamma` (binary search), dense [{GRID},{GRID}] arrays: {summary(fast_full)}")
    print(f"- for comparison, argmax over a [{GRID},{GRID},{DEFAULT_MAX_GAMMA + 1}] table in chunks of "
          f"{CHUNK_ROWS} rows: {summary(brute_full)}")
    print(f"- same best speedup (rtol 1e-12) at {same:.4%} of grid points")


if __name__ == "__main__":
    main()
