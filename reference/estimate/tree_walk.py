"""Teacher-forced token trees: any tree drafter of the protocol along the target's own sequences
(a feature draft's EAGLE-2 trees, a heads lattice; their trees are deterministic).

Decoding emits a sequence x distributed as the target's (exactness; at T = 0 its greedy
sequence), and a drafter's proposal at an iteration that starts at continuation position t
depends only on what it was fed up to x_<t. Given that x is emitted, a deterministic tree's
acceptance is deterministic at any temperature: recursive rejection over one-hot siblings
(`core.tree.sampled_tree_verdict`) accepts a child exactly when the token emitted there is its
token (a rejected child's token leaves the residual the next token is drawn from), so the
iteration accepts the nodes of the walk along x, as the greedy walk does at T = 0. Conditioning
on the estimator's samples of the target is then the replay's argument for chains
(docs/estimator.md, "Replay").

So the drafter is driven as decoding drives it, through the protocol alone: started with the
prompt's prefill, then at every position asked for the proposal it would make at each draft
length g = 1..width and handed the commit of x_t alone (n_accepted 0), with the target's hidden
states of one pass over the whole sequence (a causal model's states do not depend on later
tokens). A tree at length g is not the first g levels of a deeper one (its node budget spreads
over its depths), so each length's tree is walked along x_t, x_t+1, ...: `match[g - 1, t]` its
accepted nodes, `block[g - 1, t]` its depth and `nodes[g - 1, t]` its node count (what the
target verifies), which `estimate.replay` reads per iteration.
A proposal must leave the drafter's state as it was (every tree drafter's does).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Scored, Verdict
from specdec.reference.core.tree import accepted_along
from specdec.reference.estimate.samples import TargetSamples
from specdec.reference.estimate.teacher_forced import DraftRows
from specdec.reference.model.forward import forward
from specdec.reference.model.placement import input_device


class TreeWalkScorer:
    """A tree drafter's trees along the target's own sequences; target: the model whose pass it reads."""

    def __init__(self, target: torch.nn.Module, drafter, width: int) -> None:
        self.target, self.drafter, self.width = target, drafter, width

    @torch.inference_mode()
    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        if not self.drafter.deterministic:
            raise SpecdecError(f"{type(self.drafter).__name__}'s trees are sampled: only deterministic trees are "
                               "verified (and estimated)")
        return [self._walk(samples.prompts[i], samples.continuations[i], sampling) for i in indices]

    def _walk(self, prompt: Sequence[int], cont: Sequence[int], sampling: SamplingConfig) -> DraftRows:
        drafter, n, start = self.drafter, len(cont), len(prompt) - 1  # start: the pending token's position
        hidden, layers = self._pass([int(x) for x in prompt] + [int(x) for x in cont])
        drafter.start(prompt, _rows(hidden, layers, 0, start) if start > 0 else None)
        match, depth, nodes = (np.zeros((self.width, n), np.int64) for _ in range(3))
        roots: list[list[int]] = []
        for t in range(n):
            for g in range(1, self.width + 1):
                proposal = drafter.propose(g, sampling, None)
                tokens, parents = proposal.tokens.tolist(), proposal.parents
                match[g - 1, t] = accepted_along(tokens, parents, cont[t:t + g])
                depth[g - 1, t] = proposal.depth()
                nodes[g - 1, t] = len(tokens)
            # the first level of the deepest tree (the last proposal; a chain's: its first token)
            roots.append([x for i, x in enumerate(tokens) if (i == 0 if parents is None else parents[i] < 0)])
            drafter.commit(Verdict(0, torch.tensor([int(cont[t])]), False, []),
                           _rows(hidden, layers, start + t, start + t + 1))
        return DraftRows(None, None, tree_match=match, tree_depth=depth, tree_nodes=nodes, tree_roots=roots)

    def _pass(self, seq: list[int]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The target's final hidden states [T - 1, d] (and fused layers) over seq[:-1], as the drafter needs."""
        needs = self.drafter.needs
        if not needs:
            return None, None
        _, hidden, layers = forward(self.target, torch.tensor([seq[:-1]], device=input_device(self.target)), 1, needs)
        return hidden[0], None if layers is None else layers[0]


def _rows(hidden: torch.Tensor | None, layers: torch.Tensor | None, a: int, b: int) -> Scored:
    """A pass of positions a..b-1 whose last row produced the next committed token."""
    return Scored(torch.empty(1, 0), None if hidden is None else hidden[a:b], None if layers is None else layers[a:b])
