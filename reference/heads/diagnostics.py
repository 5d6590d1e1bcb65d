"""The BPD paper's diagnostics of heads on held-out text (Kim et al. 2024, Sec. 6): per-head
entropy (its Fig. 2) and h_max, consecutive repetition and maximum run length in the drafts
(its Table 3, left half), and per-head top-1 / top-k agreement with the target.

Indexing follows the paper: head 1 is the target's own output layer (the next token y), heads
2..h are ours (our head i is the paper's head i + 1); a draft block is [y, d_1, ..., d_H], y
the text's next token (teacher forcing), agreement is with the target's argmax there.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.reference.model.forward import forward
from specdec.reference.core.seams import Needs
from specdec.reference.heads.model import BlockHeads

ENTROPY_BINS = 20


@dataclass
class Diagnostics:
    """mean_entropy[j]: nats, paper head j + 1 (0 = the target's own); entropy_histogram[j]:
    counts over `entropy_edges`; h_max: the paper's h_max; repetition: fraction of neighbouring
    draft tokens that are equal; max_run: mean over blocks of the longest run of equal tokens;
    top1[i] / topk[i]: our head i + 1's argmax equals / the target's argmax is among its `k` best."""

    positions: int
    mean_entropy: list[float]
    entropy_edges: list[float]
    entropy_histogram: list[list[int]]
    h_max: int
    repetition: float
    max_run: float
    top1: list[float]
    topk: list[float]
    k: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def h_max(mean_entropy: Sequence[float]) -> int:
    """max k such that the mean entropy rises (weakly) from head 1 to head k (1-based)."""
    k = 1
    while k < len(mean_entropy) and mean_entropy[k - 1] <= mean_entropy[k]:
        k += 1
    return k


def runs(blocks: np.ndarray) -> tuple[float, float]:
    """(fraction of equal neighbours, mean longest run of equal tokens) over blocks [N, B]."""
    equal = blocks[:, 1:] == blocks[:, :-1]  # [N, B - 1]
    longest = np.ones(blocks.shape[0], dtype=np.int64)
    current = np.ones(blocks.shape[0], dtype=np.int64)
    for j in range(equal.shape[1]):
        current = np.where(equal[:, j], current + 1, 1)
        longest = np.maximum(longest, current)
    return float(equal.mean()) if equal.size else 0.0, float(longest.mean())


def entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = logits.float().log_softmax(-1)
    return -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(-1)


@torch.inference_mode()
def diagnose(model: torch.nn.Module, heads: BlockHeads, windows: Sequence[Sequence[int]], k: int = 5
             ) -> Diagnostics:
    """The diagnostics over every position t of every window with t + H + 1 inside it."""
    ent, top1, topk, blocks = [], [], [], []
    for w in windows:
        ids = torch.tensor([list(w)], device=heads.weight.device)
        out, states, _ = forward(model, ids, 0, Needs(hidden=True))
        logits, hidden = out[0], states[0]  # [L, V], [L, d]
        n = len(w) - heads.n_heads - 1
        if n < 1:
            continue
        argmax = logits.argmax(-1)  # [L]: the target's next token at every position
        y = ids[0, 1:n + 1]  # the committed next token the heads draft under
        restricted = heads(hidden[:n], y)  # [n, H, V']
        drafts = heads.vocab[restricted.argmax(-1)]  # [n, H]
        truth = torch.stack([argmax[i:i + n] for i in range(1, heads.n_heads + 1)], 1)  # [n, H]
        ent.append(torch.cat([entropy(logits[:n])[:, None], entropy(restricted)], 1).cpu())
        top1.append((drafts == truth).float().cpu())
        best = heads.vocab[restricted.topk(min(k, restricted.shape[-1]), -1).indices]  # [n, H, k]
        topk.append((best == truth[..., None]).any(-1).float().cpu())
        blocks.append(torch.cat([y[:, None], drafts], 1).cpu())
    if not ent:
        raise SpecdecError(f"windows must be longer than {heads.n_heads + 1} tokens")
    e = torch.cat(ent).numpy()
    top = float(np.ceil(e.max())) or 1.0
    edges = np.linspace(0.0, top, ENTROPY_BINS + 1)
    mean_entropy = [float(x) for x in e.mean(0)]
    repetition, max_run = runs(torch.cat(blocks).numpy())
    return Diagnostics(
        positions=int(e.shape[0]), mean_entropy=mean_entropy, entropy_edges=[float(x) for x in edges],
        entropy_histogram=[[int(c) for c in np.histogram(e[:, j], bins=edges)[0]] for j in range(e.shape[1])],
        h_max=h_max(mean_entropy), repetition=repetition, max_run=max_run,
        top1=[float(x) for x in torch.cat(top1).mean(0)], topk=[float(x) for x in torch.cat(topk).mean(0)], k=k)
