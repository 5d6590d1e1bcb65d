"""The feature drafter (EAGLE; docs/eagle.md): the draft layer of `specdec.reference.eagle.model`
autoregressive over the target's features, chains or dynamic token trees (EAGLE-2).

The draft keeps its own cache: one entry (f_i, x_(i+1)) per committed position i whose
feature the target has computed, i.e. all but the pending token. The verification pass gives
the features of the pending token and of the accepted drafts (the scorer returns them:
`needs` asks for the final hidden states), so `commit` adds those entries in one layer call
and the last one's output drafts the next block's first token: no extra target pass. The
prefill pass (the prompt but its last token) fills the cache at `start`; with a fused prefill
there is no such pass, the first iteration drafts nothing and its commit fills the cache.

A tree (`tree=(topk, nodes)`) is grown as EAGLE-2 does: from the root's top-k, at each depth the
topk nodes with the highest cumulative draft log-probability are expanded by their top-k (one
layer call per depth, each node attending the cache and its ancestors), and the `nodes` best
of all candidates form the tree. Trees are deterministic (top-k, no sampling), so the loop
verifies them at any temperature (recursive rejection over siblings).
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.core.seams import Proposal, Scored, Verdict
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.eagle.model import EagleDraft


class EagleDrafter(DrafterBase):
    """Chains of up to gamma tokens, or with tree=(topk, nodes) trees of `nodes` tokens and depth
    up to gamma; vocab_size: rows of the target's output layer (q's width)."""

    def __init__(self, draft: EagleDraft, vocab_size: int, tree: tuple[int, int] | None = None) -> None:
        self.draft = draft
        self.needs = draft.needs
        self.vocab_size = vocab_size
        self.shape_tree = tree
        self.tree = tree is not None
        self.deterministic = self.tree
        self.fallback = not self.tree
        self.tokens: list[int] = []
        self.keys = self.values = None  # [1, m, draft layers * kv_heads, hd]: entries 0..m-1
        self.last: torch.Tensor | None = None  # [d] output of the last entry (predicts the next token)

    def max_nodes(self, gamma: int) -> int:
        """A tree's `nodes`; a chain's gamma."""
        return gamma if self.shape_tree is None else self.shape_tree[1]

    @property
    def cached(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[1])

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        self.tokens = [int(t) for t in prompt]
        self.keys = self.values = self.last = None
        if prefill is not None and prefill.hidden is not None and prefill.hidden.shape[0]:
            self.extend(prefill.hidden, prefill.layers)

    def snapshot(self) -> tuple:
        """The per-sequence state (`restore` returns to it): the sequence, the cache entries, the
        last output and the tree shape. Nothing is copied: `extend` and `start` build new tensors
        and lists rather than change these."""
        return self.tokens, self.keys, self.values, self.last, self.shape_tree

    def restore(self, state: tuple) -> None:
        self.tokens, self.keys, self.values, self.last, self.shape_tree = state

    def propose_shape(self, shape: tuple[int, int] | None, depth: int, sampling: SamplingConfig,
                      generator: torch.Generator | None = None) -> Proposal:
        """One draft of `depth` from the cache in the given shape: a chain (None), or EAGLE-2's
        tree of (top-k per depth, nodes); the drafter's own shape is left as it was."""
        if shape is None:
            return self.propose(depth, sampling, generator)
        own, self.shape_tree = self.shape_tree, shape
        try:
            return self.propose_tree(depth)
        finally:
            self.shape_tree = own

    @torch.inference_mode()
    def extend(self, hidden: torch.Tensor, layers: torch.Tensor | None = None) -> None:
        """Add the entries of the next len(hidden) positions (the target's final hidden states
        [n, d] and, for a fusing draft, its layers' [n, len(layers), d]; the committed tokens after
        them), attending to the cache and causally to each other."""
        m, n = self.cached, int(hidden.shape[0])
        device = self.draft.vocab.device
        features = self.draft.committed(hidden.float().to(device),
                                        None if layers is None else layers.float().to(device))
        token = torch.tensor([self.tokens[m + 1:m + 1 + n]], device=device)
        allowed = torch.cat([torch.ones(n, m, dtype=torch.bool), torch.ones(n, n, dtype=torch.bool).tril()], 1)
        past = None if self.keys is None else (self.keys, self.values)
        out, k, v = self.draft(features[None], token, torch.arange(m, m + n, device=device)[None],
                               past, allowed.to(device))
        self.keys = k if self.keys is None else torch.cat([self.keys, k], 1)
        self.values = v if self.values is None else torch.cat([self.values, v], 1)
        self.last = out[0, -1]

    @torch.inference_mode()
    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        if self.last is None or gamma <= 0:
            return Proposal.empty()
        if self.tree:
            return self.propose_tree(gamma)
        device = self.draft.vocab.device
        tokens, qs = [], []
        keys, values, out = self.keys, self.values, self.last
        for j in range(gamma):
            restricted = self.draft.logits(out)
            if keep_going is not None and not keep_going(j, restricted.softmax(-1)):
                break
            if sampling.greedy:
                token = int(self.draft.vocab[restricted.argmax()])
            else:
                q = sampling.probs(self.draft.full_logits(restricted, self.vocab_size))
                token = int(sample(q, generator))
                qs.append(q)
            tokens.append(token)
            if j + 1 == gamma:
                break
            m = int(keys.shape[1])
            out, k, v = self.draft(out[None, None], torch.tensor([[token]], device=device),
                                   torch.tensor([[m]], device=device), (keys, values),
                                   torch.ones(1, m + 1, dtype=torch.bool, device=device))
            keys, values, out = torch.cat([keys, k], 1), torch.cat([values, v], 1), out[0, 0]
        return Proposal(torch.tensor(tokens, dtype=torch.long), torch.stack(qs) if qs else None)

    def propose_tree(self, depth: int) -> Proposal:
        """EAGLE-2's dynamic tree: (tokens, parents) of the `nodes` best candidates."""
        topk, budget = self.shape_tree
        device = self.draft.vocab.device
        m = self.cached
        tokens: list[int] = []  # restricted columns until the end
        parents: list[int] = []
        scores: list[float] = []
        level_depth: list[int] = []
        logq = self.draft.logits(self.last).float().log_softmax(-1)
        top = logq.topk(min(topk, logq.shape[-1]))
        frontier = []
        for value, col in zip(top.values.tolist(), top.indices.tolist()):
            frontier.append(len(tokens))
            tokens.append(col), parents.append(-1), scores.append(value), level_depth.append(1)
        node_keys, node_values, entry_of, outs = [], [], {}, {}  # entries of expanded nodes
        for level in range(2, depth + 1):
            expand = sorted(frontier, key=lambda i: -scores[i])[:topk]
            feature = torch.stack([self.last if parents[i] < 0 else outs[parents[i]] for i in expand])
            n_prev = sum(int(k.shape[1]) for k in node_keys)
            allowed = torch.zeros(len(expand), m + n_prev + len(expand), dtype=torch.bool)
            allowed[:, :m] = True
            for row, i in enumerate(expand):
                allowed[row, m + n_prev + row] = True
                a = parents[i]
                while a >= 0:
                    allowed[row, m + entry_of[a]] = True
                    a = parents[a]
            past = (torch.cat([self.keys] + node_keys, 1), torch.cat([self.values] + node_values, 1))
            token = self.draft.vocab[torch.tensor([[tokens[i] for i in expand]], device=device)]
            positions = torch.tensor([[m + level_depth[i] - 1 for i in expand]], device=device)
            out, k, v = self.draft(feature[None], token, positions, past, allowed.to(device))
            node_keys.append(k), node_values.append(v)
            for row, i in enumerate(expand):
                entry_of[i], outs[i] = n_prev + row, out[0, row]
            logq = self.draft.logits(out[0]).float().log_softmax(-1)  # [len(expand), V']
            top = logq.topk(min(topk, logq.shape[-1]), dim=-1)
            frontier = []
            for row, i in enumerate(expand):
                for value, col in zip(top.values[row].tolist(), top.indices[row].tolist()):
                    frontier.append(len(tokens))
                    tokens.append(col), parents.append(i), scores.append(scores[i] + value)
                    level_depth.append(level)
        keep = sorted(sorted(range(len(tokens)), key=lambda i: (-scores[i], level_depth[i]))[:budget])
        index = {old: new for new, old in enumerate(keep)}
        ids = self.draft.vocab[torch.tensor([tokens[i] for i in keep], device=device)].cpu()
        return Proposal(ids.to(torch.long), None, [index[parents[i]] if parents[i] >= 0 else -1 for i in keep])

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        """Entries for the pending token and the accepted drafts (rows of the verification pass;
        with a fused prefill, the prompt's rows before them too)."""
        if scored.hidden is None or (self.draft.layers and scored.layers is None):
            raise ValueError(f"the feature drafter needs the pass's hidden states ({self.needs})")
        self.tokens.extend(int(t) for t in verdict.tokens)
        n_logits = scored.logits.shape[0]
        before = scored.hidden.shape[0] - n_logits  # rows of the fused prompt before the pending token
        path = verdict.path if verdict.path is not None else list(range(verdict.n_accepted))
        rows = list(range(before)) + [before] + [before + 1 + i for i in path]
        need = len(self.tokens) - 1 - self.cached  # entries up to the new pending token's predecessor
        # == len(rows) in decoding; fewer when a pass is handed again (the draft timing re-commits its first pass)
        keep = rows[len(rows) - need:]
        self.extend(scored.hidden[keep], None if scored.layers is None else scored.layers[keep])

    def c_hat(self, target_flops: float) -> float:
        return self.draft.flops_per_token() / target_flops

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int, generator: torch.Generator | None):
        from specdec.reference.estimate.eagle_scorer import EagleScorer
        from specdec.reference.estimate.tree_walk import TreeWalkScorer

        if self.tree:
            return TreeWalkScorer(target, self, max_gamma)
        return EagleScorer(target, self.draft, max_gamma)


def build_drafter(arg: str, target, **place) -> tuple[EagleDrafter, str]:
    """The registry's builder of `eagle:PATH[,tree=N[,topk=K]][,weights=...]`."""
    from specdec.reference.drafters.factory import require_output_layer
    from specdec.reference.drafters.spec import eagle_args
    from specdec.reference.eagle.store import load_eagle

    path, tree, weights = eagle_args(arg)
    require_output_layer(target, "the feature draft drafts")
    draft, _ = load_eagle(path, target.model, target.path)
    note = f"feature draft, {draft.depth_text(draft.depth)} ({draft.shape.hidden} wide) over {draft.vocab.numel()} ids"
    if weights == "bf16" or (weights == "auto" and target.backend == "fast"):
        draft.packed_bf16()
        note += ", matrices in bfloat16 panels"
    if tree is not None:
        note += f"; dynamic trees of {tree[1]} nodes, top-{tree[0]} per depth"
    return EagleDrafter(draft, target.vocab_size, tree), note
