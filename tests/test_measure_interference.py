"""The CPU-interference monitor: an idle interval shows ~no foreign load, a competing
process shows about one core, and run_undisturbed retries disturbed attempts."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from specdec.reference.measure.interference import CpuMonitor, _machine_busy_seconds, run_undisturbed

needs_proc = pytest.mark.skipif(_machine_busy_seconds() is None, reason="no /proc/stat")


@needs_proc
def test_own_work_is_not_foreign_load() -> None:
    idle = CpuMonitor()
    idle.start()
    time.sleep(0.5)
    if idle.stop() > 0.2:  # the test needs a quiet machine to say anything
        pytest.skip("other processes are busy on this machine")
    monitor = CpuMonitor()
    monitor.start()
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:  # busy in this process only
        pass
    assert monitor.stop() < 0.6  # other processes on the machine may add a little


@needs_proc
def test_a_competing_process_shows_as_load() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nend=time.time()+1.5\nwhile time.time()<end: pass"])
    try:
        time.sleep(0.2)
        monitor = CpuMonitor()
        monitor.start()
        time.sleep(1.0)
        assert monitor.stop() > 0.5
    finally:
        spinner.wait()


def test_run_undisturbed_keeps_the_least_disturbed_attempt(monkeypatch) -> None:
    loads = iter([0.9, 0.5, 0.05])
    monkeypatch.setattr(CpuMonitor, "stop", lambda self: next(loads))
    calls = []
    result, load, attempts = run_undisturbed(lambda: calls.append(1) or len(calls), retries=5, wait=0)
    assert (result, load, attempts) == (3, 0.05, 3)
    loads = iter([0.9, 0.5])
    monkeypatch.setattr(CpuMonitor, "stop", lambda self: next(loads))
    calls.clear()
    assert run_undisturbed(lambda: calls.append(1) or len(calls), retries=1, wait=0) == (2, 0.5, 2)
