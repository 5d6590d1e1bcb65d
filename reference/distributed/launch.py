"""`specdec estimate --processes N`: the ranks launched through torchrun's own API
(`torch.distributed.run`), after the command line was checked once in this process, so a bad
option is one line, said once, and nothing of torchrun's is printed for it."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Sequence

from specdec.errors import SpecdecError, Terminated

MAX_PROCESSES = 64
LAUNCHER_ENV = "SPECDEC_LAUNCHER"  # the launcher's pid, in its ranks' environment
GRACE_S = 5.0  # a rank whose launcher died has this long to unwind on SIGTERM before it is ended


def without_option(argv: Sequence[str], name: str) -> list[str]:
    """argv with `name VALUE` / `name=VALUE` removed (the launcher's own option)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


def launch(processes: int, argv: Sequence[str]) -> None:
    """Run `python -m specdec argv` in `processes` ranks on this machine (torchrun --standalone),
    each with its share of the threads; a failed rank is one SpecdecError naming it (the rank's
    own error line was printed by the rank)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    if os.environ.get("WORLD_SIZE") or os.environ.get("RANK"):
        raise SpecdecError("--processes launches the ranks itself: run it without torchrun")
    from torch.distributed.elastic.multiprocessing.api import SignalException

    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // processes)))
    os.environ[LAUNCHER_ENV] = str(os.getpid())
    args = get_args_parser().parse_args(["--standalone", f"--nproc-per-node={processes}", "-m", "specdec", *argv])
    try:
        run(args)  # torchrun's agent ends the ranks on the way out of a signal
    except ChildFailedError as exc:
        ranks = ", ".join(str(failure.local_rank) for failure in exc.failures.values())
        raise SpecdecError(f"rank(s) {ranks} of {processes} failed (their error is above)") from None
    except SignalException as exc:  # SIGINT / SIGTERM reached the agent: the command's own exits
        raise (KeyboardInterrupt() if exc.sigval == signal.SIGINT else Terminated()) from None
    finally:
        os.environ.pop(LAUNCHER_ENV, None)


def die_with_launcher() -> None:
    """In a rank: end with the launcher, even when it is killed outright (SIGKILL runs none of
    its handlers). Linux sends SIGTERM on the parent's death (PR_SET_PDEATHSIG: the command
    unwinds and exits 143), and a watchdog thread ends the process GRACE_S later should the main
    thread sit in a collective that does not return to Python."""
    launcher = int(os.environ.get(LAUNCHER_ENV) or 0)
    if not launcher:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != launcher:  # gone before the line above took effect
        os._exit(143)

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(0.5)
        time.sleep(GRACE_S)
        os._exit(143)

    threading.Thread(target=watch, name="launcher-watchdog", daemon=True).start()
