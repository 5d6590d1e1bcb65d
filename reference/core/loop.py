"""The one decode loop: speculative sampling, the autoregressive baseline and BiLD.

p is the target's distribution, q the draft's, gamma the draft length. Each iteration:
drafter.propose (up to the draft-length policy's budget, stopping where its keep_going says)
-> target.score (one pass over the pending token and the k drafts, with the hidden states the
drafter needs) -> an acceptance rule -> commit to both (the drafter gets the pass) -> the
policy observes the verdict. Methods differ only in their drafter, their draft-length policy
and their rule (`SpeculativeSampling` here, BiLD's `BildRollback` in
`specdec.reference.bild.policy`, whose fallback is the `ConfidenceThreshold` policy); the
baseline is the same loop with the `NoDrafter`. The seams: `specdec.reference.core.seams`;
the policies: `specdec.reference.core.policy`; the method: docs/decoder.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.policy import DraftPolicy, as_policy
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Proposal, Verdict
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.target import Scorer
from specdec.reference.core.tree import greedy_tree_verdict, sampled_tree_verdict
from specdec.reference.core.verifier import verify
from specdec.reference.drafters.protocol import Drafter, NoDrafter


@dataclass
class DecodeResult:
    tokens: list[int]  # generated tokens, prompt excluded
    from_drafter: list[bool]  # [len(tokens)] True where the token is an accepted (kept) draft
    stats: DecodeStats


class AcceptanceRule(Protocol):
    """Turns the target's logits over the drafts into the tokens an iteration emits."""

    def __call__(self, logits: torch.Tensor, proposal: Proposal, sampling: SamplingConfig,
                 generator: torch.Generator | None) -> Verdict:
        """logits: [k + 1, vocab] target logits; row i predicts the token after draft[:i]."""


@dataclass(frozen=True)
class SpeculativeSampling:
    """Algorithm 1 of Leviathan et al. (exact for lenience 1; App. A.5 lenience l < 1 is not)."""

    lenience: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.lenience <= 1:
            raise SpecdecError(f"lenience must be in (0, 1], got {self.lenience}")

    def __call__(self, logits: torch.Tensor, proposal: Proposal, sampling: SamplingConfig,
                 generator: torch.Generator | None) -> Verdict:
        if proposal.parents is not None:  # several drafts as a tree
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
        p = sampling.probs(logits)  # float32 [k + 1, vocab]
        return verify(p, proposal.q, proposal.tokens.to(p.device), generator, self.lenience)


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


def draft(drafter: Drafter, policy: DraftPolicy, room: int, sampling: SamplingConfig,
          generator: torch.Generator | None) -> Proposal:
    """The drafter's proposal of at most `room` tokens; the policy's keep_going may end it early."""
    if room <= 0:
        return Proposal.empty()
    if policy.stops_early:
        return drafter.propose(room, sampling, generator, keep_going=policy.keep_going)
    return drafter.propose(room, sampling, generator)


def decode(target: Scorer, drafter: Drafter, prompt: Sequence[int], max_new_tokens: int,
           gamma: int | DraftPolicy, sampling: SamplingConfig, generator: torch.Generator | None,
           rule: AcceptanceRule = SpeculativeSampling(), eos_id: int | None = None,
           fuse_prefill: bool = False) -> DecodeResult:
    """Generate up to max_new_tokens after `prompt` (stops after eos_id if given).

    gamma: most drafts per iteration (the decoder never drafts past the token budget), or a
        draft-length policy (`specdec.reference.core.policy`) that sets it step by step.
    fuse_prefill=False: the prompt (but its last token) is encoded first and timed as
    `time_prefill`, so every iteration is one pass over the pending token and the drafts;
    True: the first iteration's pass also encodes the prompt (HF's `generate` pass count).
    """
    policy = as_policy(gamma)
    if max_new_tokens < 1:
        raise SpecdecError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if drafter.tree and not sampling.greedy and not drafter.deterministic:
        raise SpecdecError(f"{type(drafter).__name__} proposes token trees of sampled drafts, which are verified at "
                           "temperature 0 only (deterministic trees at any temperature)")
    stats = DecodeStats(policy.k_max)
    out: list[int] = []
    from_drafter: list[bool] = []
    clock, cpu_start = StageClock(target.device), time.process_time()
    passes_before = target.forward_passes
    drafter.start(prompt, target.start(prompt, fuse_prefill, drafter.needs))
    stats.time_prefill = clock.lap()
    stats.cpu_prefill = time.process_time() - cpu_start
    policy.start()
    while len(out) < max_new_tokens:
        clock.lap()  # bookkeeping of the previous iteration is in no stage
        room = min(policy.budget(), max_new_tokens - len(out) - 1)
        proposal = draft(drafter, policy, room, sampling, generator)
        stats.time_draft += clock.lap()
        scored = target.score(proposal, drafter.needs)  # logits [k + 1, vocab]
        verdict = rule(scored.logits, proposal, sampling, generator)
        target.commit(verdict)
        stats.time_verify += clock.lap()
        drafter.commit(verdict, scored)
        policy.observe(verdict)
        stats.time_draft += clock.lap()
        new = verdict.tokens.tolist()
        stats.record(proposal.depth(), verdict.n_accepted, verdict.bonus and len(proposal) > 0, allowed=room,
                     verified=len(proposal))
        out.extend(new)
        from_drafter.extend([True] * verdict.n_accepted + [False] * (len(new) - verdict.n_accepted))
        if eos_id is not None and eos_id in new:
            cut = out.index(eos_id) + 1
            del out[cut:], from_drafter[cut:]
            break
    del out[max_new_tokens:], from_drafter[max_new_tokens:]
    stats.time_total = clock.now() - clock.start
    stats.cpu_total = time.process_time() - cpu_start
    stats.new_tokens = len(out)
    stats.target_passes = target.forward_passes - passes_before  # the prefill included
    return DecodeResult(out, from_drafter, stats)


def speculative_decode(target: Scorer, drafter: Drafter, prompt: Sequence[int], max_new_tokens: int,
                       gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                       eos_id: int | None = None, lenience: float = 1.0,
                       fuse_prefill: bool = False) -> DecodeResult:
    """Speculative sampling (Algorithm 1): the output follows p exactly for lenience 1."""
    return decode(target, drafter, prompt, max_new_tokens, gamma, sampling, generator,
                  SpeculativeSampling(lenience), eos_id, fuse_prefill)


def autoregressive_decode(target: Scorer, prompt: Sequence[int], max_new_tokens: int,
                          sampling: SamplingConfig, generator: torch.Generator | None,
                          eos_id: int | None = None, fuse_prefill: bool = False) -> DecodeResult:
    """The baseline: one target pass per token, same cache handling and sampling."""
    return decode(target, NoDrafter(), prompt, max_new_tokens, 0, sampling, generator, eos_id=eos_id,
                  fuse_prefill=fuse_prefill)
