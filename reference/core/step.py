"""One decode step for B slots: the whole algorithm, for one sequence (B = 1) and for a batch.

p is the target's distribution, q the draft's (Leviathan et al.). A step: every busy slot's
room (the draft-length policy's budget, capped by its request's tokens left) -> one proposal
per slot (`DraftSlots.propose`, the policy's keep_going bound to the slot) -> one target pass
over every slot's pending token and drafts -> one call of the acceptance rule for all slots,
each request drawing from its own generator -> commit to the target and the drafter, the
policy observes, the counts are recorded, each request takes its tokens (cut after EOS and
at its budget). `decode` (`specdec.reference.core.loop`) and `decode_batch`
(`specdec.reference.core.batch_loop`) only start requests and call the step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch

from specdec.reference.core.policy import DraftPolicy
from specdec.reference.core.rules import AcceptanceRule
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import NOTHING, Needs, Proposal, Scored, Verdict
from specdec.reference.core.stats import DecodeStats
from specdec.reference.drafters.slots import DraftSlots


class SlotScorer(Protocol):
    """The target side of a step: `rows` slots (`BatchScorer`; `PerSlot` for single-sequence scorers)."""

    rows: int
    output_device: torch.device  # where the logits are (and the requests' generators)
    forward_passes: int

    def start(self, slot: int, prompt: Sequence[int], needs: Needs = NOTHING) -> Scored | None:
        """Slot `slot` begins `prompt`; returns the prefill pass (None when there was none)."""

    def score(self, proposals: Sequence[Proposal | None], needs: Needs = NOTHING) -> list[Scored | None]:
        """One pass; per slot Scored(logits [k + 1, vocab], ...), None where proposals[slot] is None."""

    def commit(self, slot: int, verdict: Verdict) -> None:
        """Keep the slot's accepted drafts, then the verdict's last token (pending)."""


class StageClock:
    """Wall time by stage; on a GPU the queue is drained before each reading."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.last = self.start = self.now()

    def now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def lap(self) -> float:
        """Seconds since the previous lap (or the start)."""
        now = self.now()
        elapsed, self.last = now - self.last, now
        return elapsed


@dataclass
class Request:
    """The sequence a slot decodes: up to max_new_tokens after its prompt, drawn from `generator`."""

    number: int  # its place in the caller's queue
    max_new_tokens: int
    generator: torch.Generator | None = None  # its own (None: the global generator)
    tokens: list[int] = field(default_factory=list)  # generated, prompt excluded
    from_drafter: list[bool] = field(default_factory=list)  # [len(tokens)] True: an accepted draft
    done: bool = False

    def emit(self, verdict: Verdict, eos_id: int | None) -> int:
        """Append the verdict's tokens, cut after eos_id and at max_new_tokens; returns how many."""
        new = verdict.tokens.tolist()
        before = len(self.tokens)
        self.tokens.extend(new)
        self.from_drafter.extend([True] * verdict.n_accepted + [False] * (len(new) - verdict.n_accepted))
        cut = self.max_new_tokens
        if eos_id is not None and eos_id in new:
            cut, self.done = min(cut, before + new.index(eos_id) + 1), True
        del self.tokens[cut:], self.from_drafter[cut:]
        self.done |= len(self.tokens) >= self.max_new_tokens
        return len(self.tokens) - before


@dataclass
class StepResult:
    """emitted[s]: tokens slot s took (0: idle); outcomes: (slot, drafts fed to the target (a
    tree: its nodes), accepted) of every busy slot; seconds: the step; pass_seconds: its target pass alone; draft_seconds: the
    drafters' proposals alone."""

    emitted: list[int]
    outcomes: list[tuple[int, int, int]]
    seconds: float
    pass_seconds: float
    draft_seconds: float = 0.0


@dataclass
class Step:
    """What stays from step to step; `stats` gathers every step's counts and stage times."""

    target: SlotScorer
    drafters: DraftSlots
    policy: DraftPolicy
    sampling: SamplingConfig
    rule: AcceptanceRule
    stats: DecodeStats
    clock: StageClock
    eos_id: int | None = None

    def start(self, slot: int, prompt: Sequence[int]) -> None:
        """Slot `slot` begins `prompt`: the target's prefill, then the drafter's (timed as prefill)."""
        before, cpu = self.clock.now(), time.process_time()
        self.drafters.start(slot, prompt, self.target.start(slot, prompt, self.drafters.needs))
        self.policy.start(slot)
        self.stats.time_prefill += self.clock.now() - before
        self.stats.cpu_prefill += time.process_time() - cpu

    def __call__(self, requests: Sequence[Request | None]) -> StepResult:
        """Advance every slot whose request (requests[slot]) is not done by one target pass."""
        busy = [s for s, r in enumerate(requests) if r is not None and not r.done]
        rooms: list[int | None] = [None] * len(requests)
        for s in busy:
            rooms[s] = min(self.policy.budget(s), requests[s].max_new_tokens - len(requests[s].tokens) - 1)
        generators = [None if r is None else r.generator for r in requests]
        self.clock.lap()
        proposals = self.drafters.propose(rooms, self.sampling, generators, self.policy)
        t_draft = self.clock.lap()
        scored = self.target.score(proposals, self.drafters.needs)
        t_pass = self.clock.lap()
        verdicts = self.rule([scored[s].logits for s in busy], [proposals[s] for s in busy], self.sampling,
                             [generators[s] for s in busy])
        for s, verdict in zip(busy, verdicts):
            self.target.commit(s, verdict)
        t_verify = self.clock.lap()
        emitted = [0] * len(requests)
        outcomes = []
        for s, verdict in zip(busy, verdicts):
            proposal = proposals[s]
            self.drafters.commit(s, verdict, scored[s])
            self.policy.observe(verdict, s)
            self.stats.record(proposal.depth(), verdict.n_accepted, verdict.bonus and len(proposal) > 0,
                              allowed=rooms[s], verified=len(proposal))
            emitted[s] = requests[s].emit(verdict, self.eos_id)
            outcomes.append((s, len(proposal), verdict.n_accepted))
        t_commit = self.clock.lap()
        self.stats.time_draft += t_draft + t_commit
        self.stats.time_verify += t_pass + t_verify
        self.stats.time_pass += t_pass
        self.stats.new_tokens += sum(emitted)
        return StepResult(emitted, outcomes, t_draft + t_pass + t_verify + t_commit, t_pass, t_draft)
