"""The project's bootstrap helper against scipy.stats.bootstrap (issue 21: keep our own helper, or
use scipy's where it is as fast).

The statistic is the one every interval of the project takes: a ratio of sums over groups
(sum of beta / number of positions per prompt; seconds / tokens per run), resampled by group.
For n groups and n_boot resamples, `specdec.reference.measure.bootstrap.bootstrap_ratio_ci`
(resampling weights counted from `rng.integers` draws with one `bincount`, one matrix product)
and `scipy.stats.bootstrap`
(method="percentile", paired resampling of (sums, counts), a vectorised ratio-of-sums
statistic) compute the same 95% percentile interval on the same synthetic data. Timing: the
two alternate within one run (which goes first alternating per repeat, so the machine's drift
hits both alike), each repeat with its own seed; reported are the median time of each and the
median of the per-repeat ratios scipy / ours. Agreement: the repeats' intervals are a Monte
Carlo sample of each method's endpoints; the two means must differ by less than 4 standard
errors of their difference (and the difference is shown as a share of the interval's width).
Both draw their resamples with `rng.integers(0, n, (n_boot, n))`, so from the same seed they
give the same interval (a difference of 0).

    .venv/bin/python benchmarks/bench_bootstrap.py [--groups 12 48 200 1000] [--n-boot 2000] [--repeats 60]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy
import scipy.stats

from specdec.reference.measure.bootstrap import bootstrap_ratio_ci

Interval = Callable[[np.ndarray, np.ndarray, int, int], tuple[float, float]]


def ours(sums: np.ndarray, counts: np.ndarray, seed: int, n_boot: int) -> tuple[float, float]:
    return bootstrap_ratio_ci(sums, counts, np.random.default_rng(seed), n_boot)


def ratio_of_sums(sums: np.ndarray, counts: np.ndarray, axis: int = -1) -> np.ndarray:
    """sum(sums) / sum(counts) along `axis` (scipy hands [..., n] resamples)."""
    return sums.sum(axis=axis) / counts.sum(axis=axis)


def theirs(sums: np.ndarray, counts: np.ndarray, seed: int, n_boot: int) -> tuple[float, float]:
    res = scipy.stats.bootstrap((sums, counts), ratio_of_sums, n_resamples=n_boot, vectorized=True, paired=True,
                                method="percentile", confidence_level=0.95, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


METHODS: dict[str, Interval] = {"ours": ours, "scipy": theirs}


def groups(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic per-prompt data: float [n] sums of beta over float [n] counts of 16..64 positions."""
    counts = rng.integers(16, 65, n).astype(np.float64)
    return counts * rng.uniform(0.3, 0.9, n), counts


@dataclass
class Timed:
    """Per method: seconds [repeats] and intervals [repeats, 2] (lo, hi), one per seed."""

    seconds: dict[str, list[float]]
    intervals: dict[str, np.ndarray]


def time_pair(sums: np.ndarray, counts: np.ndarray, n_boot: int, repeats: int, warm_up: int = 2) -> Timed:
    """Both methods alternating, repeat r with seed r for both; the first `warm_up` pairs untimed."""
    seconds: dict[str, list[float]] = {name: [] for name in METHODS}
    intervals: dict[str, list[tuple[float, float]]] = {name: [] for name in METHODS}
    names = list(METHODS)
    for r in range(warm_up + repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            ci = METHODS[name](sums, counts, r, n_boot)
            elapsed = time.perf_counter() - start
            if r >= warm_up:
                seconds[name].append(elapsed)
                intervals[name].append(ci)
    return Timed(seconds, {name: np.array(v) for name, v in intervals.items()})


def agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Difference of the mean endpoints over its Monte Carlo standard error: float [2] (lo, hi)."""
    se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b))
    return (a.mean(axis=0) - b.mean(axis=0)) / se


def row(n: int, n_boot: int, t: Timed) -> str:
    mine, scipys = t.seconds["ours"], t.seconds["scipy"]
    ratio = statistics.median(s / o for s, o in zip(scipys, mine))
    a, b = t.intervals["ours"], t.intervals["scipy"]
    z = agreement(a, b)
    width = float(np.mean(a[:, 1] - a[:, 0]))
    diff = np.abs(a.mean(axis=0) - b.mean(axis=0)) / width
    lo, hi = a.mean(axis=0)
    slo, shi = b.mean(axis=0)
    return (f"| {n} | {n_boot} | {1e3 * statistics.median(mine):.2f} | {1e3 * statistics.median(scipys):.2f} | "
            f"{ratio:.2f} | [{lo:.4f}, {hi:.4f}] | [{slo:.4f}, {shi:.4f}] | {z[0]:+.1f}, {z[1]:+.1f} | "
            f"{100 * diff.max():.1f}% | {bool(np.all(np.abs(z) < 4))} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[12, 48, 200, 1000])
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"machine: {platform.processor() or platform.machine()}; numpy {np.__version__}, scipy {scipy.__version__}; "
          f"{args.repeats} paired repeats per size, 95% percentile intervals of a ratio of sums")
    print("| groups | n_boot | ours ms (median) | scipy ms (median) | scipy / ours (median of paired ratios) | "
          "ours CI (mean) | scipy CI (mean) | endpoint difference / MC s.e. (lo, hi) | largest difference / CI width | "
          "agree (< 4 s.e.) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.groups:
        sums, counts = groups(n, rng)
        print(row(n, args.n_boot, time_pair(sums, counts, args.n_boot, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
