"""`specdec estimate --processes N`: the ranks launched through torchrun's own API
(`torch.distributed.run`), after the command line was checked once in this process, so a bad
option is one line, said once, and nothing of torchrun's is printed for it."""
from __future__ import annotations

import os
from typing import Sequence

from specdec.errors import SpecdecError

MAX_PROCESSES = 64


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
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // processes)))
    args = get_args_parser().parse_args(["--standalone", f"--nproc-per-node={processes}", "-m", "specdec", *argv])
    try:
        run(args)
    except ChildFailedError as exc:
        ranks = ", ".join(str(failure.local_rank) for failure in exc.failures.values())
        raise SpecdecError(f"rank(s) {ranks} of {processes} failed (their error is above)") from None
