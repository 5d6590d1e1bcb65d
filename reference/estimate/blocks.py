"""What the replay and the per-position acceptance need from teacher-forced rows, beyond beta:
for deterministic blocks the leading tokens that match the sequence, for drafts with known
deeper positions the acceptance along the sequence (`path_accept`), for blockwise drafts each
draft position's beta (docs/estimator.md, "Replay")."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

if TYPE_CHECKING:
    from specdec.reference.estimate.teacher_forced import DraftRows


def leading_matches(block: Sequence[int], truth: Sequence[int]) -> int:
    """How many leading tokens of block equal truth (truth may be shorter)."""
    n = 0
    for a, b in zip(block, truth):
        if a != b:
            break
        n += 1
    return n


def chain_matches(agree: np.ndarray, cap: int) -> np.ndarray:
    """Run length of consecutive True values starting at each position, capped: int64 [n]."""
    run = np.zeros(agree.shape[0] + 1, dtype=np.int64)
    for t in range(agree.shape[0] - 1, -1, -1):
        run[t] = run[t + 1] + 1 if agree[t] else 0
    return np.minimum(run[:-1], cap)


def chain_blocks(tokens: np.ndarray, match: np.ndarray, cap: int, stop_token: int | None) -> np.ndarray:
    """Block lengths of a greedy chain drafter from each position: int64 [n].

    The chain from t is known up to its first mismatch: tokens[t .. t + match[t]]. A drafter
    that stops after `stop_token` has a block ending there when the stop token is in that
    known part; otherwise the block is taken as `cap` long (what follows the first mismatch
    is the draft's own continuation, which teacher forcing does not see: acceptance counts
    stay exact, the number of drafted tokens may then be overestimated).
    """
    n = tokens.shape[0]
    block = np.full(n, cap, dtype=np.int64)
    if stop_token is None:
        return block
    stops = np.nonzero(tokens == stop_token)[0]
    for t in range(n):
        j = np.searchsorted(stops, t)
        if j < stops.size and stops[j] <= t + match[t] and stops[j] - t < cap:
            block[t] = stops[j] - t + 1
    return block


def path_accept(p: torch.Tensor, draft: DraftRows, truth: Sequence[int], max_gamma: int) -> np.ndarray:
    """[W, n] min(1, q(x)/p(x)) for draft i + 1 of the block at t, x = truth[t + i] (0 past the
    end): a chain drafter's q at t + i (its drafts depend on the prefix alone, and accepted
    drafts are the sequence's tokens), W = max_gamma, 0 after the stop token; a blockwise
    draft's offset_q[t, i], W its width. p: [n, V] the target's (adjusted) distributions."""
    n = p.shape[0]
    x = torch.tensor(truth, dtype=torch.long, device=p.device)[:, None]  # [n, 1]
    p_x = p.gather(-1, x)[:, 0].double().clamp_min(1e-30)  # x was sampled from p: p(x) > 0 but for rounding
    if draft.offset_q is None:  # a chain: one ratio per position, draft i + 1 of the block at t sits at t + i
        ratio = (draft.q.to(p.device).gather(-1, x)[:, 0].double() / p_x).clamp(max=1.0).cpu().numpy()
        goes_on = np.asarray(truth) != (-1 if draft.stop_token is None else draft.stop_token)
        out, alive = np.zeros((max_gamma, n)), np.ones(n)  # alive[t]: no stop token among drafts 1..i
        for i in range(min(max_gamma, n)):
            out[i, :n - i] = ratio[i:] * alive[:n - i]  # past a stop token the block has ended: counted
            alive[:n - i - 1] *= goes_on[i:n - 1]        # as a rejection, the same tokens emitted
        return out
    width = draft.offset_q.shape[1]
    out = np.zeros((width, n))
    for i in range(width):
        m = n - i  # block starts whose draft i + 1 is inside the sequence
        q_x = draft.offset_q[:m, i].to(p.device).gather(-1, x[i:])[:, 0].double()
        out[i, :m] = (q_x / p_x[i:]).clamp(max=1.0).cpu().numpy()
    return out


def offset_beta(p: torch.Tensor, draft: DraftRows) -> np.ndarray | None:
    """For blockwise drafts: beta [H, n] of draft position i (1-based row i - 1) of the block
    drafted at t, against p at t + i - 1; NaN where t + i - 1 is past the sequence. p: [n, V]."""
    if not draft.blockwise:
        return None
    n = p.shape[0]
    width = draft.offset_q.shape[1] if draft.offset_q is not None else max(len(b) for b in draft.blocks)
    out = np.full((width, n), np.nan)
    for i in range(width):
        m = n - i  # block starts whose position i is inside the sequence
        if draft.offset_q is not None:
            out[i, :m] = torch.minimum(p[i:], draft.offset_q[:m, i].to(p.device)).sum(-1, dtype=torch.float64).cpu()
        else:
            tokens = torch.tensor([b[i] for b in draft.blocks[:m]], dtype=torch.long, device=p.device)
            out[i, :m] = p[i:].gather(-1, tokens[:, None])[:, 0].double().cpu()
    return np.clip(out, 0.0, 1.0)
