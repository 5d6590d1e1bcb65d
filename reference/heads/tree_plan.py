"""Planning parallel drafts: which (method, k, p) of the lattice study is fastest on this
machine. An iteration verifies 1 + N tokens (the pending one and the N nodes of the draft
tree) and drafts once, so its time is t(1 + N) + the heads' pass + choosing the paths, and

    predicted speedup = block efficiency * t(1) / (t(1 + N) + t_heads + t_choose),

N the mean tree size of the method, t(k) the measured one-pass time over k tokens (the
verify-cost curve, linearly interpolated), t_heads the heads' top-k pass, t_choose the
method's measured path search per block. Loop overheads are left out (about 1 % of a step).
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
import torch

from specdec.reference.estimate.timing import evict_caches
from specdec.reference.heads.model import BlockHeads


@torch.inference_mode()
def heads_pass_seconds(heads: BlockHeads, k: int, repeats: int = 50) -> float:
    """Median seconds of one drafting step's heads pass: H heads on one hidden state, top-k."""
    hidden = torch.zeros(1, heads.hidden_size, device=heads.weight.device)
    token = torch.zeros(1, dtype=torch.long, device=heads.weight.device)
    times = []
    for _ in range(repeats + 5):
        evict_caches(heads.weight.device)  # as in decoding, right after a target pass
        start = time.perf_counter()
        logq = heads(hidden, token)[0].float().log_softmax(-1)
        logq.topk(min(k, logq.shape[-1]), dim=-1).indices.cpu()
        times.append(time.perf_counter() - start)
    return float(np.median(times[5:]))


def plan_trees(rows: Sequence[dict[str, Any]], verify_seconds: Sequence[float], heads_seconds: float
               ) -> list[dict[str, Any]]:
    """Predicted speedup of every realizable method of a lattice study, best first.

    rows: the study's block_efficiency rows; verify_seconds: t(1..K), K > 1 + the largest tree."""
    t = np.asarray(verify_seconds, dtype=np.float64)
    ks = np.arange(1, t.shape[0] + 1)
    out = []
    for r in rows:
        if r.get("choose_ms") is None or r.get("tree_tokens") is None:
            continue
        tokens = 1.0 + r["tree_tokens"]
        if tokens > ks[-1]:
            raise ValueError(f"{r['method']}: trees of {tokens:.1f} tokens exceed the verify-cost curve's {ks[-1]}")
        iteration = float(np.interp(tokens, ks, t)) + heads_seconds + r["choose_ms"] / 1000
        out.append({"method": r["method"], "block_efficiency": r["block_efficiency"], "tree_tokens": r["tree_tokens"],
                    "iteration_ms": 1000 * iteration, "predicted_speedup": r["block_efficiency"] * t[0] / iteration})
    return sorted(out, key=lambda row: -row["predicted_speedup"])
