"""The draft's confidence right after its own rejected token (issue 52): the law the dynamic draft
length model prices a draft past a rejection with (`simulator.dynamic.ConfidenceLaw.off`).

Teacher forcing scores the draft along the target's sequence only, but a block whose draft at t is
rejected goes on drafting after the draft's own token, not the sequence's, and a draft is more
confident there than on the sequence (benchmarks/bench_past_rejection.py). So each scored sequence
adds, per position t, the tokens a rejected draft carries there and their weights:

- T = 0: the draft's argmax where it differs from the target's token, weight 1;
- T > 0: the rejected draft's law: a draft x ~ q is rejected with probability max(0, 1 - p(x)/q(x)),
  so P(drafted x and rejected) = (q - p)+(x), summing to 1 - beta (p and q adjusted, as the decoder
  samples them). It is read at `BRANCHES` fixed quantiles of its distribution function (the tokens
  sorted by mass, the midpoint rule, no draws): each quantile's token weighs (1 - beta) / BRANCHES,
  a token hit by several quantiles is scored once with their summed weight, and the tail is
  represented in proportion to its mass (the likeliest tokens alone would drop it).

The drafter then scores each such token in place of x_t (a neural draft in one pass, every token
attending to its own prefix only, a 4D mask: `model.forward.branch_logits`; an n-gram from its
context) and reports its confidence after it: the next draft position's, read as on the sequence
(`teacher_forced.top_confidence`). A
drafter's token that ends its block (the n-gram's EOS) drafts nothing after it and is skipped. Only
the first draft past a rejection is scored; the model uses its law for every later one.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from specdec.reference.core.sampling import SamplingConfig

BRANCHES = 16  # T > 0: quantiles of the rejected draft's law read per position


def rejected_tokens(p_logits: torch.Tensor, draft, truth: Sequence[int], sampling: SamplingConfig
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions t [R], tokens [R], weights [R]) of the rejected drafts of one sequence
    (`teacher_forced.DraftRows` `draft`, target logits p_logits [n, V] at its n positions)."""
    n = p_logits.shape[0]
    if draft.q is None:  # deterministic: the draft's token, rejected where it is not the target's
        token = draft.token.cpu().numpy()[:n]
        keep = (token >= 0) & (token != np.asarray(truth[:n]))
        t, x, w = np.flatnonzero(keep), token[keep], np.ones(int(keep.sum()))
    else:
        residual = (draft.q.to(p_logits.device).double() - sampling.probs(p_logits).double()).clamp_min(0.0)
        mass, order = residual.sort(dim=-1, descending=True)  # [n, V]
        total = mass.sum(-1, keepdim=True)  # [n, 1]: 1 - beta
        cdf = mass.cumsum(-1) / total.clamp_min(1e-300)
        u = (torch.arange(BRANCHES, dtype=torch.float64, device=cdf.device) + 0.5) / BRANCHES
        at = torch.searchsorted(cdf, u.expand(n, BRANCHES).contiguous()).clamp_max(cdf.shape[-1] - 1)  # [n, B]
        token = order.gather(-1, at).cpu().numpy()  # [n, B]
        share = (total / BRANCHES).expand(n, BRANCHES).cpu().numpy()
        keys = np.arange(n)[:, None] * (token.max(initial=0) + 1) + token  # one branch per (t, token)
        keys, first, back = np.unique(keys.ravel(), return_index=True, return_inverse=True)
        w = np.bincount(back, weights=share.ravel())
        t, x = first // BRANCHES, token.ravel()[first]
        keep = w > 0
        t, x, w = t[keep], x[keep], w[keep]
    if draft.stop_token is not None:
        go_on = x != draft.stop_token
        t, x, w = t[go_on], x[go_on], w[go_on]
    return t.astype(np.int64), x.astype(np.int64), w.astype(np.float64)
