"""The one decode loop: speculative sampling, the autoregressive baseline and BiLD.

p is the target's distribution, q the draft's, gamma the draft length. `decode` drives the one
decode step (`specdec.reference.core.step`) for a batch of one: drafter.propose (up to the
draft-length policy's budget, stopping where its keep_going says) -> target.score (one pass over
the pending token and the k drafts, with the hidden states the drafter needs) -> an acceptance
rule -> commit to both (the drafter gets the pass) -> the policy observes the verdict. Methods
differ only in their drafter, their draft-length policy and their rule (`SpeculativeSampling`,
`specdec.reference.core.rules`; BiLD's `BildRollback` in `specdec.reference.bild.policy`, whose
fallback is the `ConfidenceThreshold` policy); the baseline is the same loop with the
`NoDrafter`. The seams: `specdec.reference.core.seams`; the policies:
`specdec.reference.core.policy`; the method: docs/decoder.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.policy import DraftPolicy, as_policy
from specdec.reference.core.rules import AcceptanceRule, SpeculativeSampling
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.step import Request, StageClock, Step
from specdec.reference.core.scorer import PerSlot, Scorer
from specdec.reference.drafters.protocol import Drafter, NoDrafter
from specdec.reference.drafters.slots import Forked


@dataclass
class DecodeResult:
    tokens: list[int]  # generated tokens, prompt excluded
    from_drafter: list[bool]  # [len(tokens)] True where the token is an accepted (kept) draft
    stats: DecodeStats


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
    check_trees(drafter, sampling)
    stats = DecodeStats(policy.k_max)
    clock, cpu_start = StageClock(target.device), time.process_time()
    passes_before = target.forward_passes
    step = Step(PerSlot([target], fuse_prefill), Forked([drafter]), policy, sampling, rule, stats, clock, eos_id)
    request = Request(0, max_new_tokens, generator)
    step.start(0, prompt)
    while not request.done:
        step([request])
    stats.time_total = clock.now() - clock.start
    stats.cpu_total = time.process_time() - cpu_start
    stats.target_passes = target.forward_passes - passes_before  # the prefill included
    return DecodeResult(request.tokens, request.from_drafter, stats)


def check_trees(drafter: Drafter, sampling: SamplingConfig) -> None:
    """Token trees of sampled drafts are verified at temperature 0 only (deterministic trees at
    any temperature: `specdec.reference.core.tree.sampled_tree_verdict`)."""
    if drafter.tree and not sampling.greedy and not drafter.deterministic:
        raise SpecdecError(f"{type(drafter).__name__} proposes token trees of sampled drafts, which are verified at "
                           "temperature 0 only (deterministic trees at any temperature)")


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
