"""The draft's blocks from every position of a sequence at once (EAGLE-3's training-time test,
and the teacher-forced rows of the estimator).

A window of tokens x_0..x_(L-1) with the target's features f_0..f_(L-1) has entries
u = 0..L-2, (f_u, x_(u+1)). Depth 1 is one causal pass over them: out_1[u] predicts x_(u+2).
Depth j at entry u continues the block that starts at s = u - j + 1 (the last committed entry)
as drafting does: its feature is out_(j-1)[u - 1] (the draft's own prediction), its token the
one drafted before it (`own=True`) or the true x_(u+1) (`own=False`, the training-time test),
and it attends to the committed entries <= s and to the block's own entries of depths 2..j-1 at
u - (j - i) (a diagonal mask, not a causal one). Row u of every depth is labelled by p at
position u + 1; rows u < j - 1 have no block and are left out (`valid`).
"""
from __future__ import annotations

import torch

from specdec.reference.eagle.model import EagleDraft


def shift(x: torch.Tensor, by: int) -> torch.Tensor:
    """x [B, n, ...] moved `by` rows later along dim 1 (the first `by` rows zero)."""
    if by == 0:
        return x
    out = torch.zeros_like(x)
    out[:, by:] = x[:, :-by]
    return out


def depth_mask(n: int, j: int, device: torch.device) -> torch.Tensor:
    """bool [n, n * j]: entry u at depth j > 1 attends to base entries <= u - j + 1, the depth-i
    entries (i = 2..j-1) shifted to its row, and itself; at depth 1, causally to the base."""
    u = torch.arange(n, device=device)
    base = torch.arange(n, device=device)[None, :] <= (u[:, None] - j + 1)
    if j == 1:
        return base  # the committed entries: causal
    eye = torch.eye(n, dtype=torch.bool, device=device)
    blocks = [base] + [eye & (u[:, None] >= j - i) for i in range(2, j)] + [eye]
    return torch.cat(blocks, 1)


def unroll(draft: EagleDraft, features: torch.Tensor, tokens: torch.Tensor, depth: int, own: bool,
           first_row: int = 0, layers: torch.Tensor | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
    """(restricted logits [B, n - first_row, V'] of depths 1..depth at entries first_row..n-1
    (n = L - 1), depth 1's predicted features [B, n, d]).

    features [B, L, d] (the target's), tokens int64 [B, L]; layers [B, L, n, d]: the target's
    hidden states after the layers a fusing draft reads (`EagleDraft.committed`). Gradients
    flow through every depth (the training-time test); wrap in no_grad / inference_mode to
    score. first_row: the earliest block start asked for (the output layer runs on rows >=
    first_row only; the blocks that start earlier get placeholder tokens)."""
    b, length, _ = features.shape
    n = length - 1
    device = features.device
    positions = torch.arange(n, device=device)[None].expand(b, n)
    base = draft.committed(features[:, :n], None if layers is None else layers[:, :n])
    out, k, v = draft(base, tokens[:, 1:], positions, None, depth_mask(n, 1, device))
    first = out
    logits = [draft.logits(out[:, first_row:])]
    keys, values = [k], [v]
    for j in range(2, depth + 1):
        feature = shift(out, 1)
        if own:
            drafted = torch.zeros_like(tokens[:, 1:])
            drafted[:, first_row:] = draft.vocab[logits[-1].argmax(-1)]
            token = shift(drafted[..., None], 1)[..., 0]
        else:
            token = tokens[:, 1:]
        past = (torch.cat([keys[0]] + [shift(keys[i - 1], j - i) for i in range(2, j)], 1),
                torch.cat([values[0]] + [shift(values[i - 1], j - i) for i in range(2, j)], 1))
        out, k, v = draft(feature, token, positions, past, depth_mask(n, j, device))
        logits.append(draft.logits(out[:, first_row:]))
        keys.append(k)
        values.append(v)
    return logits, first


def valid(n: int, depth: int, device: torch.device) -> torch.Tensor:
    """bool [depth, n]: rows u >= j - 1 of depth j (those that continue a block)."""
    return torch.arange(n, device=device)[None, :] >= torch.arange(depth, device=device)[:, None]
