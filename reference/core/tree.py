"""Token trees: several drafts verified in one target pass (parallel drafts, Kim et al. 2024).

Drafts sharing a prefix share its nodes: the tree holds N nodes in an order where a parent
comes before its children (tokens [N], parents [N], -1 = a child of the pending token). The
target sees the pending token(s) then the N nodes, each at position (its depth) after the
pending token, attending to the cache, the pending tokens and its own ancestors only (a 4D
additive attention mask). Greedy acceptance walks from the root along the child whose
token is the target's argmax; sampled acceptance of deterministic drafts tries each node's
children in turn by recursive rejection (`sampled_tree_verdict`). The method and its tests:
docs/decoder.md.
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.reference.core.sampling import sample, uniform


def trie(paths: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """(tokens, parents) of the prefix tree of `paths`, nodes in first-seen order."""
    tokens: list[int] = []
    parents: list[int] = []
    children: dict[tuple[int, int], int] = {}
    for path in paths:
        node = -1
        for token in path:
            key = (node, int(token))
            if key not in children:
                children[key] = len(tokens)
                tokens.append(int(token))
                parents.append(node)
            node = children[key]
    return tokens, parents


def depths(parents: Sequence[int]) -> list[int]:
    """1-based depth of every node (a child of the pending token has depth 1)."""
    out: list[int] = []
    for p in parents:
        if p >= len(out):
            raise ValueError("a parent must come before its children")
        out.append(1 if p < 0 else out[p] + 1)
    return out


def chain_parents(n: int) -> list[int]:
    return list(range(-1, n - 1))


def is_chain(parents: Sequence[int]) -> bool:
    return list(parents) == chain_parents(len(parents))


def ancestry(parents: Sequence[int]) -> torch.Tensor:
    """[N, N] bool: node i attends to node j (j is i or one of its ancestors)."""
    n = len(parents)
    seen = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= i:
            raise ValueError("a parent must come before its children")
        if p >= 0:
            seen[i] |= seen[p]
    return seen


def tree_inputs(n_cached: int, n_pending: int, parents: Sequence[int], dtype: torch.dtype, device: torch.device
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(position_ids [1, P + N], additive attention mask [1, 1, P + N, n_cached + P + N]) for P
    pending tokens (a causal chain) followed by a tree of N nodes hanging off the last one."""
    n = len(parents)
    q = n_pending + n
    allowed = torch.zeros(q, n_cached + q, dtype=torch.bool)
    allowed[:, :n_cached] = True
    allowed[:n_pending, n_cached:n_cached + n_pending] = torch.ones(n_pending, n_pending).tril().bool()
    allowed[n_pending:, n_cached:n_cached + n_pending] = True
    allowed[n_pending:, n_cached + n_pending:] = ancestry(parents)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    positions = list(range(n_cached, n_cached + n_pending)) + [n_cached + n_pending - 1 + x for x in depths(parents)]
    return torch.tensor([positions], device=device), mask[None, None].to(device)


def child(tokens: Sequence[int], parents: Sequence[int], node: int, token: int) -> int | None:
    """The child of `node` (-1: the root) carrying `token`, or None."""
    return next((i for i, (t, p) in enumerate(zip(tokens, parents)) if p == node and t == token), None)


def accepted_along(tokens: Sequence[int], parents: Sequence[int], truth: Sequence[int]) -> int:
    """Nodes decoding accepts of a deterministic tree when the tokens it emits after it are
    `truth`: the walk along truth from the root (at T = 0 the greedy walk; at T > 0 recursive
    rejection over one-hot siblings accepts exactly these, `sampled_tree_verdict`). A chain
    (parents None): its leading tokens equal to truth's."""
    node, n = -1, 0
    parents = range(-1, len(tokens) - 1) if parents is None else parents
    for want in truth:
        node = child(tokens, parents, node, int(want))
        if node is None:
            return n
        n += 1
    return n


def greedy_tree_verdict(logits: torch.Tensor, tokens: Sequence[int], parents: Sequence[int]) -> tuple[list[int], int]:
    """(accepted nodes, the target's next token after them) from logits [1 + N, V]: row 0 is the
    pending token's, row 1 + i node i's. Exact greedy: every accepted node is the argmax after
    its ancestors, and the returned token is the argmax after the last accepted node."""
    best = logits.argmax(-1).tolist()
    path, node = [], -1
    while True:
        want = best[node + 1]
        nxt = child(tokens, parents, node, want)
        if nxt is None:
            return path, want
        path.append(nxt)
        node = nxt


def sampled_tree_verdict(p: torch.Tensor, tokens: Sequence[int], parents: Sequence[int],
                         generator: torch.Generator | None) -> tuple[list[int], int]:
    """(accepted nodes, the token drawn after them) from the target's adjusted distributions
    p [1 + N, V] (row 0 the pending token's, row 1 + i node i's) for a tree of deterministic
    drafts (q one-hot at every node). At each node its children are tried in order by recursive
    rejection: with r the residual (p at first), a child carrying token t is accepted with
    probability r(t) / sum(r); a rejected child's token leaves r (r(t) = 0); when every child is
    rejected the next token is drawn from r, and after a leaf from p (the bonus). This is
    multi-draft speculative sampling (SpecInfer, Miao et al. 2024) with one-hot draft
    distributions; the emitted tokens follow p exactly (tests/test_core_tree.py)."""
    path, node = [], -1
    while True:
        residual = p[node + 1].double().clone()
        accepted = None
        for i in (j for j, parent in enumerate(parents) if parent == node):
            total = float(residual.sum())
            u = float(uniform((1,), generator, residual.device, torch.float64))
            if total > 0 and u * total < float(residual[tokens[i]]):
                accepted = i
                break
            residual[tokens[i]] = 0.0
        if accepted is None:
            weights = residual if float(residual.sum()) > 0 else p[node + 1].double()  # float corner cases
            return path, int(sample(weights, generator))
        path.append(accepted)
        node = accepted
