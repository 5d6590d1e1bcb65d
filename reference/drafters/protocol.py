"""The drafter protocol: anything that proposes draft tokens for the target to verify.

Names follow Leviathan et al.: p is the target's distribution, q the draft's, gamma the
number of drafted tokens per iteration.

A drafter follows the committed sequence (prompt + every token the decoder has emitted).
`propose` drafts up to gamma tokens after it; it may keep speculative state (e.g. KV
entries of drafted tokens), which `commit` discards beyond what was accepted. Drafters
are built from plain values (a path, an order), never from a global config.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.tree import depths


@dataclass
class Proposal:
    """Drafted tokens and the draft distributions they were drawn from.

    tokens: LongTensor [k], 0 <= k <= gamma (a drafter may propose fewer, even none).
    q: float32 [k, vocab], q[i] is the adjusted draft distribution token i was drawn from;
       None for a deterministic drafter (q[i] is one-hot at tokens[i]).
    parents: several drafts as one token tree (`specdec.reference.core.tree`): parents[i] is
       node i's parent node, -1 for a first token; None = one draft, a chain. Trees are
       verified greedily (temperature 0) only.
    """

    tokens: torch.Tensor
    q: torch.Tensor | None = None
    parents: list[int] | None = None

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def depth(self) -> int:
        """Draft positions: the longest draft of a tree, else the length."""
        if self.parents is None:
            return len(self)
        return max(depths(self.parents), default=0)

    @classmethod
    def empty(cls) -> "Proposal":
        return cls(torch.empty(0, dtype=torch.long))


class Drafter(Protocol):
    """What the speculative decoder needs from a draft model."""

    def start(self, prompt: Sequence[int]) -> None:
        """Begin a new sequence: the committed sequence becomes `prompt`."""

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                min_confidence: float = 0.0) -> Proposal:
        """Draft up to gamma tokens continuing the committed sequence.

        min_confidence: stop before the first position whose draft distribution's top
            probability is below min_confidence; that token is not proposed (BiLD's fallback,
            Kim et al. 2023, Sec. 3.3). The confidence is the drafter's own unadjusted
            distribution (before temperature, top-k, top-p), so a threshold means the same
            under greedy decoding, where the adjusted q is one-hot. 0 (default) never stops
            early. A deterministic drafter (prompt lookup) counts as fully confident.
        """

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        """The decoder appended `tokens` to the committed sequence.

        tokens[:n_accepted] are the first n_accepted tokens of the last proposal (kept); the
        rest (the corrected or bonus token) are new. Speculative state past the accepted
        drafts must be discarded.
        """


class NoDrafter:
    """Proposes nothing: the decode loop with it is plain autoregressive decoding."""

    def start(self, prompt: Sequence[int]) -> None:
        pass

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                min_confidence: float = 0.0) -> Proposal:
        return Proposal.empty()

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        pass
