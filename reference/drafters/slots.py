"""The drafter side of one decode step over B slots: every busy slot's proposal, asked at once.

q is the draft's distribution (Leviathan et al.). `DraftSlots` is what the step
(`specdec.reference.core.step`) drives: `propose` returns a proposal for every slot given a
room, `start` and `commit` follow one slot's sequence. `Forked` serves any drafter: one fork per
slot (the drafter itself for a batch of one), drafting in turn. A drafter that drafts every
slot in one pass returns its own from `Drafter.slots` (the neural draft model:
`specdec.reference.drafters.neural.NeuralSlots`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Needs, Proposal, Scored, Verdict

if TYPE_CHECKING:
    from specdec.reference.core.policy import DraftPolicy
    from specdec.reference.drafters.protocol import Drafter


class DraftSlots(Protocol):
    """A drafter for B slots, each following its own committed sequence."""

    needs: Needs  # what the drafter reads from the target's passes

    def start(self, slot: int, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        """Slot `slot` begins `prompt` (prefill: the target's pass over it, as `Drafter.start`)."""

    def propose(self, rooms: Sequence[int | None], sampling: SamplingConfig,
                generators: Sequence[torch.Generator | None], policy: "DraftPolicy") -> list[Proposal | None]:
        """Per slot a proposal of at most rooms[slot] tokens (None: the slot is idle, no proposal),
        drawn with generators[slot]; where `policy.stops_early`, slot s's draft ends at the first
        position where policy.keep_going(position, q_row, s) is False."""

    def commit(self, slot: int, verdict: Verdict, scored: Scored) -> None:
        """Slot `slot` appended verdict.tokens (as `Drafter.commit`)."""


class Forked:
    """One drafter per slot, each drafting in turn."""

    def __init__(self, drafters: Sequence["Drafter"]) -> None:
        self.drafters = list(drafters)
        self.needs = self.drafters[0].needs

    def start(self, slot: int, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        self.drafters[slot].start(prompt, prefill)

    def propose(self, rooms: Sequence[int | None], sampling: SamplingConfig,
                generators: Sequence[torch.Generator | None], policy: "DraftPolicy") -> list[Proposal | None]:
        out: list[Proposal | None] = []
        for slot, (drafter, room, generator) in enumerate(zip(self.drafters, rooms, generators)):
            if room is None or room <= 0:
                out.append(None if room is None else Proposal.empty())
            elif policy.stops_early:
                out.append(drafter.propose(room, sampling, generator,
                                           keep_going=lambda i, q, s=slot: policy.keep_going(i, q, s)))
            else:
                out.append(drafter.propose(room, sampling, generator))
        return out

    def commit(self, slot: int, verdict: Verdict, scored: Scored) -> None:
        self.drafters[slot].commit(verdict, scored)
