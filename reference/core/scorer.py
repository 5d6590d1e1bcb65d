"""The target side of the decode step as the algorithm sees it (the scorer seam).

p is the target's distribution. A `Scorer` follows one sequence: `start`, `score` (one pass
over the pending token and the drafts: k + 1 rows of logits), `commit`. `OneRow` shows one
as a batch of one slot to the decode step (`specdec.reference.core.step.SlotScorer`).
`FixedLogitsScorer` returns fixed logits at no cost (the loop's own overhead is what remains
when it is timed). The model-backed scorers live below the seam:
`specdec.reference.model.target.TargetScorer` (one sequence) and
`specdec.reference.model.batch_scorer.BatchScorer` (a ragged batch).
"""
from __future__ import annotations

from typing import Protocol, Sequence

import torch

from specdec.reference.core.seams import NOTHING, Needs, Proposal, Scored, Verdict


class Scorer(Protocol):
    """What the decode loop needs from the target side."""

    device: torch.device
    forward_passes: int  # target forward passes so far (the loop reports the difference)

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False, needs: Needs = NOTHING) -> Scored | None:
        """Begin a sequence; returns the prefill pass (None when there was none)."""

    def score(self, proposal: Proposal, needs: Needs = NOTHING) -> Scored:
        """Logits [k + 1, vocab]: row i predicts the token after draft[:i] (row k: bonus); for
        a draft tree (proposal.parents), row 0 the token after the pending one, row 1 + i the
        token after node i."""

    def commit(self, verdict: Verdict) -> None:
        """Keep the verdict's accepted drafts (a tree: its path), then its last token (pending)."""


class OneRow:
    """A `Scorer` seen by the decode step as a batch of one slot (`specdec.reference.core.step`)."""

    rows = 1

    def __init__(self, target: Scorer, fuse_prefill: bool = False) -> None:
        self.target, self.fuse_prefill = target, fuse_prefill

    @property
    def output_device(self) -> torch.device:
        return self.target.device

    @property
    def forward_passes(self) -> int:
        return self.target.forward_passes

    def start(self, slot: int, prompt: Sequence[int], needs: Needs = NOTHING) -> Scored | None:
        return self.target.start(prompt, self.fuse_prefill, needs)

    def score(self, proposals: Sequence[Proposal | None], needs: Needs = NOTHING) -> list[Scored | None]:
        return [self.target.score(proposals[0], needs)]

    def commit(self, slot: int, verdict: Verdict) -> None:
        self.target.commit(verdict)


class FixedLogitsScorer:
    """A scorer that returns the same real logits instantly: the decode loop's own cost
    (sampling transform, verifier, bookkeeping) is what remains when it is timed."""

    forward_passes = 0

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits  # [K + 1, vocab]
        self.device = logits.device

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False, needs: Needs = NOTHING) -> Scored | None:
        return None

    def score(self, proposal: Proposal, needs: Needs = NOTHING) -> Scored:
        return Scored(self.logits[:len(proposal) + 1])

    def commit(self, verdict: Verdict) -> None:
        pass
