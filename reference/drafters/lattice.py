"""Parallel drafts from the heads' top-k lattice (Kim et al. 2024, Sec. 7): the p best paths
(heads' log-probabilities, optionally interpolated with an n-gram's) verified together as one
token tree in the target's next pass. p = 1 with an n-gram is "n-gram rescoring", p > 1
"parallel BPD"; `local=True` is the paper's local rescoring (Algorithm 2: one path chosen left
to right), whose rescorer may also be a causal LM (`LMRescorer`). The paths are the lattice's
best (no sampling), so the tree is deterministic and verified at any temperature (greedy
acceptance at 0, recursive rejection over siblings above).
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.errors import SpecdecError
from specdec.ngram.rescore import CachedScorer, Lattice, kbest_paths, local_rescore
from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Proposal, Scored, Verdict
from specdec.reference.core.tree import trie
from specdec.reference.drafters.heads import HeadsDrafter


class LatticeDrafter(HeadsDrafter):
    """k candidates per head, the p best paths; rescorer (an `NgramModel`, or an `LMRescorer`
    with local=True) interpolated with `weight`."""

    tree = True
    deterministic = True  # the k best paths: no sampling, whatever the temperature
    fallback = False  # it drafts whole lattices: keep_going is not asked

    def __init__(self, heads, vocab_size: int, k: int = 4, p: int = 4, rescorer=None, weight: float = 0.0,
                 local: bool = False) -> None:
        super().__init__(heads, vocab_size)
        if k < 1 or p < 1 or weight < 0:
            raise SpecdecError(f"need k >= 1, p >= 1 and weight >= 0, got k={k}, p={p}, w={weight}")
        if local and (rescorer is None or p != 1):
            raise SpecdecError("local rescoring needs a rescorer and p = 1")
        width = min(k, int(heads.vocab.numel()))
        if p > 1 and (width == 1 or p > width ** min(heads.n_heads, 64)):  # the lattice's paths: width^H
            raise SpecdecError(f"p={p} asks for more paths than the top-{width} lattice of {heads.n_heads} heads has")
        self.k, self.p, self.rescorer, self.weight, self.local = k, p, rescorer, weight, local
        self.committed: list[int] = []

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        super().start(prompt, prefill)
        self.committed = [int(t) for t in prompt]

    @torch.inference_mode()
    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        depth = min(gamma, self.heads.n_heads)
        if self.hidden is None or depth <= 0:
            return Proposal.empty()
        token = torch.tensor([self.token], dtype=torch.long, device=self.hidden.device)
        logq = self.heads(self.hidden[None], token, depth)[0].float().log_softmax(-1)  # [depth, V']
        top = logq.topk(min(self.k, logq.shape[-1]), dim=-1)
        lattice = Lattice(self.heads.vocab[top.indices].cpu().numpy(), top.values.double().cpu().numpy())
        scorer = None if self.rescorer is None or self.weight == 0 else CachedScorer(self.rescorer)
        state = self.rescorer.state_for(self.committed) if scorer is not None else ()
        if self.local and scorer is not None:
            paths = [local_rescore(lattice, scorer, state, self.weight)]
        else:
            paths = [path for _, path in kbest_paths(lattice, scorer, state, self.weight, self.p)]
        if len(paths) == 1:
            return Proposal(torch.tensor(paths[0], dtype=torch.long))
        tokens, parents = trie(paths)
        return Proposal(torch.tensor(tokens, dtype=torch.long), None, parents)

    def max_nodes(self, gamma: int) -> int:
        """p paths of up to min(gamma, H) tokens each."""
        return self.p * min(gamma, self.heads.n_heads)

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        """The committed tokens extend the rescorer's context; h comes from the row of the last
        accepted node (`verdict.last_row`), as for a single draft."""
        self.committed.extend(verdict.tokens.tolist())
        super().commit(verdict, scored)

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int, generator: torch.Generator | None):
        """Its lattices walked along the target's text, one per draft length (`estimate.tree_walk`)."""
        from specdec.reference.estimate.tree_walk import TreeWalkScorer

        return TreeWalkScorer(target, self, max_gamma)
