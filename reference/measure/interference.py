"""Detect other processes competing for the CPU while a timing runs.

Wall-clock timings on a shared machine are only comparable when nothing else runs. A
`CpuMonitor` measures, over an interval, how many CPU cores OTHER processes kept busy on
average: the machine's busy time (from /proc/stat) minus this process's own CPU time
(os.times), divided by the wall time. On an idle 2-core machine it stays around 0.01; a
competing single-threaded job shows as ~1. Timing code retries a run whose interval saw
more than a threshold (`DEFAULT_THRESHOLD` cores) of foreign load. Where /proc/stat is
missing (not Linux) the monitor reports 0 and nothing is retried.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

DEFAULT_THRESHOLD = 0.10  # average cores used by other processes above which a timing is redone
T = TypeVar("T")


def _machine_busy_seconds() -> float | None:
    """CPU seconds all processes spent busy since boot (user + nice + system + irq + softirq + steal)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [int(x) for x in fields[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class CpuMonitor:
    """Foreign CPU load over an interval: `start()`, run the work, `stop()` -> cores used by others."""

    _busy: float | None = None
    _own: float = 0.0
    _wall: float = 0.0

    def start(self) -> None:
        self._busy = _machine_busy_seconds()
        self._own = _own_cpu_seconds()
        self._wall = time.perf_counter()

    def stop(self) -> float:
        """Average number of cores other processes kept busy since start() (>= 0; 0 if unknown)."""
        busy = _machine_busy_seconds()
        wall = time.perf_counter() - self._wall
        if busy is None or self._busy is None or wall <= 0:
            return 0.0
        other = (busy - self._busy) - (_own_cpu_seconds() - self._own)
        return max(0.0, other / wall)


def run_undisturbed(fn: Callable[[], T], retries: int = 3, threshold: float = DEFAULT_THRESHOLD,
                    wait: float = 2.0) -> tuple[T, float, int]:
    """Run fn until an attempt sees at most `threshold` cores of foreign load, at most
    1 + retries attempts (waiting `wait` seconds before each retry).

    Returns (result of the least disturbed attempt, its foreign load in cores, attempts made).
    fn must be repeatable (each attempt starts from the same state).
    """
    best: tuple[T, float] | None = None
    attempts = 0
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(wait)
        monitor = CpuMonitor()
        monitor.start()
        result = fn()
        load = monitor.stop()
        attempts += 1
        if best is None or load < best[1]:
            best = (result, load)
        if load <= threshold:
            break
    assert best is not None
    return best[0], best[1], attempts
