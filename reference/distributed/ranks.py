"""This process's place in a torchrun job, its device, its share of the work, and the process
group (gloo on CPU, NCCL on GPU) that lives as long as the job's collective part.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE (plus MASTER_ADDR/PORT for
the rendezvous); a plain process has none and is rank 0 of 1.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterator, Mapping

import torch

from specdec.errors import SpecdecError

DEFAULT_TIMEOUT_S = 1800  # a collective waits this long for a peer (torchrun ends the job sooner when one dies)


@dataclass(frozen=True)
class Ranks:
    """rank / world_size over the whole job; local_rank / local_world_size on this node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    def __post_init__(self) -> None:
        if not (0 <= self.rank < self.world_size and 0 <= self.local_rank < self.local_world_size
                and self.local_world_size <= self.world_size):
            raise SpecdecError(f"inconsistent ranks: rank {self.rank} of {self.world_size}, local rank "
                             f"{self.local_rank} of {self.local_world_size}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "Ranks":
        """The ranks torchrun's environment variables describe (rank 0 of 1 without them)."""
        def number(name: str, default: int) -> int:
            value = env.get(name, "")
            if not value:
                return default
            if not value.isdigit():
                raise SpecdecError(f"environment variable {name}={value!r} is not a non-negative integer")
            return int(value)

        world = number("WORLD_SIZE", 1)
        return cls(number("RANK", 0), world, number("LOCAL_RANK", 0), number("LOCAL_WORLD_SIZE", world))

    @property
    def main(self) -> bool:
        """Rank 0: the one process that prints and writes."""
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.world_size > 1

    def share(self, n_items: int, chunk: int) -> list[range]:
        """This rank's chunks of items 0..n_items-1: the items are cut into chunks of `chunk`
        (the last may be shorter) and chunk c goes to rank c mod world_size. The chunks are
        the same for every world size, so each is computed exactly as one process would."""
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        chunks = [range(start, min(n_items, start + chunk)) for start in range(0, n_items, chunk)]
        return chunks[self.rank::self.world_size]

    def idle(self, n_items: int, chunk: int) -> int:
        """How many ranks get no chunk at all."""
        return max(0, self.world_size - -(-n_items // chunk))


@dataclass(frozen=True)
class Placement:
    """Where this process's models go: its place in a torchrun job (rank 0 of 1 alone), its
    device, and the device maps of the target and of a neural draft (None: all on `device`)."""

    ranks: Ranks = Ranks()
    device: str = "cpu"
    device_map: Any = None
    draft_device_map: Any = None


def rank_device(device: str, ranks: Ranks) -> str:
    """The device this rank computes on: with several processes on a node, `--device cuda`
    means cuda:LOCAL_RANK (one GPU each); a fixed cuda:N would put them all on one GPU."""
    if device == "cpu":
        return device
    count = torch.cuda.device_count()
    if not device.startswith("cuda") or (device != "cuda" and not device[5:].isdigit()):
        raise SpecdecError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    if count == 0:
        raise SpecdecError(f"{device} asked for, but this machine has no CUDA device")
    if device == "cuda" and ranks.parallel:
        if ranks.local_world_size > count:
            raise SpecdecError(f"torchrun started {ranks.local_world_size} processes on this node, which has {count} "
                             "GPU(s): one process per GPU")
        return f"cuda:{ranks.local_rank}"
    if ranks.local_world_size > 1:
        raise SpecdecError(f"--device {device} would put the {ranks.local_world_size} processes of this node on one "
                         "GPU: pass --device cuda (process i takes cuda:i)")
    if device != "cuda" and int(device[5:]) >= count:
        raise SpecdecError(f"{device} asked for, but this machine has {count} CUDA device(s)")
    return device


@contextmanager
def process_group(ranks: Ranks, device: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[None]:
    """Join the job's process group for the block (nothing when there is one process): NCCL
    when this rank computes on a GPU, gloo otherwise."""
    if not ranks.parallel:
        yield
        return
    import torch.distributed as dist

    backend = "nccl" if device.startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(torch.device(device))
    try:
        dist.init_process_group(backend, rank=ranks.rank, world_size=ranks.world_size,
                                timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as exc:  # rendezvous failures: one line, not a traceback
        raise SpecdecError(f"rank {ranks.rank} could not join the {backend} process group: "
                         f"{' '.join(str(exc).split())[:300]}") from None
    try:
        yield
    finally:
        dist.destroy_process_group()
