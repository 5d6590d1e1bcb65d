"""Run one rank's share of the work and bring every rank's result to rank 0, or every rank's
failure: a rank that fails still takes part in the gather, so rank 0 can stop the job with a
message naming it instead of leaving its peers waiting."""
from __future__ import annotations

import os
import traceback
from typing import Callable, TypeVar

from specdec.errors import SpecdecError
from specdec.reference.distributed.ranks import Ranks

T = TypeVar("T")
L = TypeVar("L")


class RankFailure(SpecdecError):
    """One or more ranks failed; the message names each with its error (one line)."""


def gather_on_main(ranks: Ranks, work: Callable[[], T]) -> list[T] | None:
    """Every rank runs `work`; rank 0 returns all results in rank order, the others None.

    With one process this is `[work()]` (exceptions propagate unchanged). With several, an
    exception in any rank's work makes rank 0 raise RankFailure naming the rank(s); a failed
    rank other than 0 exits with status 1 and prints nothing (rank 0 reports it).
    """
    if not ranks.parallel:
        return [work()]
    import torch.distributed as dist

    try:
        outcome: tuple[bool, object] = (True, work())
    except Exception as exc:  # reported by rank 0; every rank must still reach the gather
        if os.environ.get("SPECDEC_DEBUG"):
            traceback.print_exc()
        text = " ".join((str(exc) or type(exc).__name__).split())
        outcome = (False, f"{type(exc).__name__}: {text}" if not isinstance(exc, (ValueError, OSError)) else text)
    received: list | None = [None] * ranks.world_size if ranks.main else None
    dist.gather_object(outcome, received, dst=0)
    if not ranks.main:
        if not outcome[0]:
            raise SystemExit(1)
        return None
    failed = [(r, message) for r, (ok, message) in enumerate(received) if not ok]
    if failed:
        raise RankFailure("; ".join(f"rank {r} of {ranks.world_size} failed: {message}" for r, message in failed))
    return [result for _, result in received]


def gather_shares(ranks: Ranks, work: Callable[[], tuple[L, T]]) -> tuple[L, list[T]] | None:
    """`gather_on_main` for work that returns (local, shared): `local` (what this process loaded,
    e.g. its models) stays in this process, only `shared` travels; rank 0 gets (its own local,
    every rank's shared in rank order), the others None."""
    kept: list[L] = []

    def share() -> T:
        local, shared = work()
        kept.append(local)
        return shared

    shared = gather_on_main(ranks, share)
    return None if shared is None else (kept[0], shared)
