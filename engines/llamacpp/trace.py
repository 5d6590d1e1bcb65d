"""llama-server's trace of its verify steps (LLAMA_TRACE=1): one line per step, "slot ...: id S |
task T | accepted a/n draft tokens" (tools/server/server-context.cpp) — each draft's length n and
how many were accepted, which the /metrics counters give only as sums."""
from __future__ import annotations

import re
import time
from typing import Sequence

import numpy as np

from specdec.engines.llamacpp.server import LlamaServer
from specdec.errors import SpecdecError

TRACE = re.compile(r"\bid\s+(\d+) \|.*?accepted\s+(\d+)/\s*(\d+) draft tokens")
TRACE_WAIT_S = 5.0  # the log is written by a worker thread: wait this long for a request's lines


def verify_steps(log: str) -> list[tuple[int, int, int]]:
    """(slot, drafted, accepted) of every verify step in a stretch of a traced server's log: one
    "slot ...: id S | task T | accepted a/n draft tokens" line each (LLAMA_TRACE > 0)."""
    return [(int(m.group(1)), int(m.group(3)), int(m.group(2))) for m in TRACE.finditer(log)]


def traced_steps(server: LlamaServer, offset: int, drafts: int) -> list[tuple[int, int, int]]:
    """`verify_steps` of what the server logged past `offset`, once as many as its counters'
    `drafts` have been written (the log's writer is a thread; SpecdecError if not)."""
    deadline = time.monotonic() + TRACE_WAIT_S
    while len(steps := verify_steps(server.log_text()[offset:])) < drafts:
        if time.monotonic() > deadline:
            raise SpecdecError(f"llama-server's trace shows {len(steps)} drafts where its counters show {drafts}")
        time.sleep(0.02)
    return steps


def draft_lengths(steps: Sequence[tuple[int, int, int]]) -> list[int]:
    """Drafts by length (index = tokens drafted; [0] stays 0, a verify step drafted something)."""
    return np.bincount(np.asarray([k for _, k, _ in steps], dtype=np.int64), minlength=1).tolist()
