"""Speculative sampling (Leviathan et al., Algorithm 1): the verifier, a pure function of B rows.

p is the target's (adjusted) distribution, q the draft's. For drafted tokens x_1..x_k:
token x_i is *accepted* while r_i * q_i(x_i) < p_i(x_i) with r_i ~ U[0, 1) (i.e. with
probability min(1, p/q)); at the first rejection a *recovered* token is drawn from
norm(max(0, p_i - q_i)); if all k are accepted a *bonus* token is drawn from p_{k+1}.
The emitted tokens are distributed exactly as sampling from p (Theorem 3.5 / App. A.1).
A deterministic drafter passes q=None: q_i is one-hot at x_i.

B requests are verified in one call (vLLM's `rejection_sampler`): their rows flattened, k_b
drafts each (ragged, 0 included). Request b draws only from generators[b], in the order of
the one-request verifier (its k_b uniforms, then one for the recovered or bonus token), so a
request's verdict is the same alone and among others.
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.reference.core.sampling import sample, uniform
from specdec.reference.core.seams import Verdict


def verify(p: torch.Tensor, q: torch.Tensor | None, draft: torch.Tensor,
           generator: torch.Generator | None, lenience: float = 1.0) -> Verdict:
    """Accept or reject one request's drafted tokens against the target.

    Args:
        p: float32 [k + 1, vocab] target distributions; row i is p(. | prefix, x_1..x_i).
        q: float32 [k, vocab] draft distributions the drafts were sampled from, or None for
            a deterministic drafter (one-hot q).
        draft: LongTensor [k] drafted tokens x_1..x_k.
        generator: source of the uniform draws and the recovered/bonus samples.
        lenience: l in (0, 1]; l < 1 compares p with l*q (App. A.5) and recovers from
            norm(max(0, p - l*q)). NOT exact for l < 1: the output no longer follows p.
    """
    return verify_rows(p, [q], [draft], [generator], lenience)[0]


def verify_rows(p: torch.Tensor, q: Sequence[torch.Tensor | None], drafts: Sequence[torch.Tensor],
                generators: Sequence[torch.Generator | None], lenience: float = 1.0) -> list[Verdict]:
    """`verify` for B requests at once.

    Args:
        p: float32 [sum_b (k_b + 1), vocab]: request b's k_b + 1 rows, requests in order.
        q: per request [k_b, vocab] or None (deterministic drafts).
        drafts: per request LongTensor [k_b].
        generators: per request its generator (None: the global one).
    """
    p = p.float()
    device, vocab, b = p.device, p.shape[-1], len(drafts)
    ks = [int(d.shape[0]) for d in drafts]
    firsts, starts = [0] * b, [0] * b  # request b's first row of p, its first draft
    for i in range(1, b):
        firsts[i], starts[i] = firsts[i - 1] + ks[i - 1] + 1, starts[i - 1] + ks[i - 1]
    n = list(ks)  # accepted drafts per request (all, until a rejection)
    x = q_flat = None
    if sum(ks):
        x = drafts[0].to(device) if b == 1 else torch.cat([d.to(device) for d in drafts])  # [D] requests in order
        rows = torch.arange(ks[0], device=device) if b == 1 else torch.tensor(
            [firsts[i] + j for i, k in enumerate(ks) for j in range(k)], device=device)  # [D] each draft's row of p
        p_x = p[rows, x]  # [D]
        if any(qb is not None for qb in q):
            q_flat = torch.cat([_one_hot(d.to(device), vocab) if qb is None else qb.float().to(device)
                                for qb, d in zip(q, drafts)]) if b > 1 else q[0].float()  # [D, vocab]
            q_x = q_flat[rows if b == 1 else torch.arange(x.shape[0], device=device), x]
        else:
            q_x = torch.ones_like(p_x)
        r = [uniform((k,), g, device) for k, g in zip(ks, generators) if k]
        rejected = ((r[0] if len(r) == 1 else torch.cat(r)) * lenience * q_x >= p_x).tolist()  # [D]
        for i, k in enumerate(ks):
            n[i] = next((j for j in range(k) if rejected[starts[i] + j]), k)  # the first rejection
    final = [firsts[i] + n[i] for i in range(b)]  # the row each request's last token comes from
    dist = p[final[0]:final[0] + 1] if b == 1 else p[torch.tensor(final, device=device)]  # [B, vocab]
    recover = [i for i in range(b) if n[i] < ks[i]]
    if recover:
        at = [starts[i] + n[i] for i in recover]  # the rejected drafts' places in x
        where = slice(at[0], at[0] + 1) if b == 1 else torch.tensor(at, device=device)
        q_n = _one_hot(x[where], vocab) if q_flat is None else q_flat[where]  # [R, vocab]
        p_n = dist if b == 1 else dist[torch.tensor(recover, device=device)]
        residual = (p_n - lenience * q_n).clamp_min(0.0)
        mass = residual.sum(-1, keepdim=True)
        empty = mass <= 0  # only if p <= l*q everywhere, where rejection has probability 0 for l = 1:
        residual = residual / mass  # floating-point corner cases fall back to p
        if bool(empty.any()):
            residual = torch.where(empty, p_n, residual)
        if b == 1:
            dist = residual
        else:
            dist[torch.tensor(recover, device=device)] = residual
    last = sample(dist, generators[0] if b == 1 else list(generators))  # [B]
    return [Verdict(m, torch.cat([d[:m].to(device), last[i:i + 1]]), bonus=m == k)
            for i, (d, k, m) in enumerate(zip(drafts, ks, n))]


def greedy_rows(target_tokens: torch.Tensor, drafts: Sequence[torch.Tensor]) -> list[Verdict]:
    """`verify_rows` at temperature 0 (p one-hot at the target's argmax), drawing nothing:
    request b keeps its drafts while they equal the target's tokens, then emits the target's.

    target_tokens: LongTensor [sum_b (k_b + 1)] argmax of every row, requests in order."""
    tokens = target_tokens.tolist()
    out, at = [], 0
    for d in drafts:
        draft = d.tolist()
        n = 0
        while n < len(draft) and draft[n] == tokens[at + n]:
            n += 1
        out.append(Verdict(n, torch.tensor(draft[:n] + [tokens[at + n]]), bonus=n == len(draft)))
        at += len(draft) + 1
    return out


def _one_hot(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """float32 [n, vocab], row i one-hot at tokens[i]."""
    return torch.zeros(tokens.shape[0], vocab, device=tokens.device).scatter_(1, tokens[:, None], 1.0)
