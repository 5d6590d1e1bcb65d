"""The target side of the decode step as the algorithm sees it (the scorer seam).

p is the target's distribution. A `Scorer` follows one sequence: `start`, `score` (one pass
over the pending token and the drafts: k + 1 rows of logits), `commit`. `PerSlot` shows one
(or one per slot) as slots to the decode step (`specdec.reference.core.step.SlotScorer`).
The model-backed scorers live below the seam:
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


class PerSlot:
    """Single-sequence `Scorer`s seen by the decode step as slots, one each
    (`specdec.reference.core.step.SlotScorer`): one for `decode`, one per slot where the ragged
    cache does not hold the model (an encoder-decoder's batch, `slot_scorer`); each busy slot's
    pass is its own."""

    def __init__(self, targets: Sequence[Scorer], fuse_prefill: bool = False) -> None:
        self.targets, self.fuse_prefill = tuple(targets), fuse_prefill

    @property
    def rows(self) -> int:
        return len(self.targets)

    @property
    def target(self) -> Scorer:
        return self.targets[0]

    @property
    def output_device(self) -> torch.device:
        return self.targets[0].device

    @property
    def forward_passes(self) -> int:
        return sum(t.forward_passes for t in self.targets)

    def start(self, slot: int, prompt: Sequence[int], needs: Needs = NOTHING) -> Scored | None:
        return self.targets[slot].start(prompt, self.fuse_prefill, needs)

    def score(self, proposals: Sequence[Proposal | None], needs: Needs = NOTHING) -> list[Scored | None]:
        return [None if p is None else t.score(p, needs) for t, p in zip(self.targets, proposals)]

    def commit(self, slot: int, verdict: Verdict) -> None:
        self.targets[slot].commit(verdict)
