"""Acceptance rules: the target's logits over B requests' drafts -> one verdict per request.

p is the target's distribution, q the draft's (Leviathan et al.). A rule is called once per
decode step for every busy slot (B = 1 for one sequence); request b draws only from its own
generator. `SpeculativeSampling` is exact (lenience 1); BiLD's rollback rule lives in
`specdec.reference.bild.policy`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Proposal, Verdict
from specdec.reference.core.tree import greedy_tree_verdict, sampled_tree_verdict
from specdec.reference.core.verifier import greedy_rows, verify_rows


class AcceptanceRule(Protocol):
    """Turns the target's logits over the drafts into the tokens each request emits."""

    def __call__(self, logits: Sequence[torch.Tensor], proposals: Sequence[Proposal], sampling: SamplingConfig,
                 generators: Sequence[torch.Generator | None]) -> list[Verdict]:
        """logits[b]: [k_b + 1, vocab] target logits of request b; row i predicts the token after
        its draft[:i]. generators[b]: request b's (None: the global generator)."""


@dataclass(frozen=True)
class SpeculativeSampling:
    """Algorithm 1 of Leviathan et al. (exact for lenience 1; App. A.5 lenience l < 1 is not):
    chains of every request in one vectorised call, trees one by one."""

    lenience: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.lenience <= 1:
            raise SpecdecError(f"lenience must be in (0, 1], got {self.lenience}")

    def __call__(self, logits: Sequence[torch.Tensor], proposals: Sequence[Proposal], sampling: SamplingConfig,
                 generators: Sequence[torch.Generator | None]) -> list[Verdict]:
        chains = [b for b, proposal in enumerate(proposals) if proposal.parents is None]
        out: list[Verdict | None] = [None] * len(proposals)
        if chains:
            rows = logits[chains[0]] if len(chains) == 1 else torch.cat([logits[b] for b in chains])  # [sum k+1, V]
            drafts = [proposals[b].tokens for b in chains]
            if sampling.greedy:
                verdicts = greedy_rows(rows.argmax(-1), drafts)
            else:
                verdicts = verify_rows(sampling.probs(rows), [proposals[b].q for b in chains], drafts,
                                       [generators[b] for b in chains], self.lenience)
            for b, verdict in zip(chains, verdicts):
                out[b] = verdict
        for b, proposal in enumerate(proposals):
            if proposal.parents is not None:
                out[b] = self.tree(logits[b], proposal, sampling, generators[b])
        return out

    def tree(self, logits: torch.Tensor, proposal: Proposal, sampling: SamplingConfig,
             generator: torch.Generator | None) -> Verdict:
        """Several drafts as a token tree: the greedy walk, or recursive rejection over siblings."""
        if self.lenience != 1.0 or not (sampling.greedy or proposal.q is None):
            raise SpecdecError("several drafts verified together (a draft tree) need lenience 1, and at "
                               "temperature > 0 deterministic drafts")
        tokens = proposal.tokens.tolist()
        if sampling.greedy:
            nodes, nxt = greedy_tree_verdict(logits, tokens, proposal.parents)
        else:
            nodes, nxt = sampled_tree_verdict(sampling.probs(logits), tokens, proposal.parents, generator)
        leaf = bool(nodes) and nodes[-1] not in proposal.parents  # a whole draft accepted
        return Verdict(len(nodes), torch.tensor([tokens[i] for i in nodes] + [nxt]), leaf, nodes)
