"""Speculative sampling (Leviathan et al., Algorithm 1): the verifier, a pure function.

p is the target's (adjusted) distribution, q the draft's. For drafted tokens x_1..x_k:
token x_i is *accepted* while r_i * q_i(x_i) < p_i(x_i) with r_i ~ U[0, 1) (i.e. with
probability min(1, p/q)); at the first rejection a *recovered* token is drawn from
norm(max(0, p_i - q_i)); if all k are accepted a *bonus* token is drawn from p_{k+1}.
The emitted tokens are distributed exactly as sampling from p (Theorem 3.5 / App. A.1).
A deterministic drafter passes q=None: q_i is one-hot at x_i.
"""
from __future__ import annotations

import torch

from specdec.reference.core.sampling import sample, uniform
from specdec.reference.core.seams import Verdict


def verify(p: torch.Tensor, q: torch.Tensor | None, draft: torch.Tensor,
           generator: torch.Generator | None, lenience: float = 1.0) -> Verdict:
    """Accept or reject drafted tokens against the target.

    Args:
        p: float32 [k + 1, vocab] target distributions; row i is p(. | prefix, x_1..x_i).
        q: float32 [k, vocab] draft distributions the drafts were sampled from, or None for
            a deterministic drafter (one-hot q).
        draft: LongTensor [k] drafted tokens x_1..x_k.
        generator: source of the uniform draws and the recovered/bonus samples.
        lenience: l in (0, 1]; l < 1 compares p with l*q (App. A.5) and recovers from
            norm(max(0, p - l*q)). NOT exact for l < 1: the output no longer follows p.
    """
    k = int(draft.shape[0])
    p = p.float()
    if k == 0:  # nothing to verify: no uniform draws
        return Verdict(0, sample(p[0], generator).reshape(1), bonus=True)
    rows = torch.arange(k, device=p.device)
    p_x = p[rows, draft]  # [k]
    q_x = torch.ones_like(p_x) if q is None else q.float()[rows, draft]  # [k]
    r = uniform((k,), generator, p.device)
    rejected = (r * lenience * q_x >= p_x).nonzero()
    if rejected.numel() == 0:
        bonus = sample(p[k], generator).reshape(1)
        return Verdict(k, torch.cat([draft, bonus]), bonus=True)
    n = int(rejected[0, 0])
    if q is None:
        q_n = torch.zeros_like(p[n])
        q_n[draft[n]] = 1.0
    else:
        q_n = q[n].float()
    residual = (p[n] - lenience * q_n).clamp_min(0.0)
    mass = residual.sum()
    # mass == 0 only if p <= l*q everywhere, where rejection has probability 0 for l = 1;
    # fall back to p for floating-point corner cases.
    recovered = sample(residual / mass if mass > 0 else p[n], generator).reshape(1)
    return Verdict(n, torch.cat([draft[:n], recovered]), bonus=False)
