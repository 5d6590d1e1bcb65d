"""Speculative decoding (Algorithm 1) and the autoregressive baseline, as one loop.

p is the target's distribution, q the draft's, gamma the draft length. Each iteration:
drafter.propose -> TargetScorer.score (one pass over gamma + 1 positions) -> verify ->
commit to both. The autoregressive baseline is the same loop with no drafter, so both
share KV-cache handling, sampling transforms and timing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch

from reference.drafter import Drafter
from reference.sampling import SamplingConfig
from reference.stats import DecodeStats
from reference.target import TargetScorer
from reference.verifier import verify


@dataclass
class DecodeResult:
    tokens: list[int]  # generated tokens, prompt excluded
    stats: DecodeStats


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def speculative_decode(target: TargetScorer, drafter: Drafter | None, prompt: Sequence[int],
                       max_new_tokens: int, gamma: int, sampling: SamplingConfig,
                       generator: torch.Generator | None, eos_id: int | None = None,
                       lenience: float = 1.0, fuse_prefill: bool = False) -> DecodeResult:
    """Generate up to max_new_tokens after `prompt` (stops after eos_id if given).

    drafter=None or gamma=0 is plain autoregressive decoding. The output distribution is
    the target's (for lenience 1): see reference.verifier.

    fuse_prefill=False: the prompt (but its last token) is encoded first and timed as
    `time_prefill`, so every iteration is one pass over the pending token and the drafts:
    the steady state that the validation and the cost model measure. fuse_prefill=True: the
    first iteration's pass encodes the prompt together with the first drafts (one pass fewer
    per generation, as HF's `generate` does; what `specdec decode` uses); `time_prefill`
    then holds only the drafter's own start.
    """
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    gamma = gamma if drafter is not None else 0
    device = target.session.device
    stats = DecodeStats(gamma)
    out: list[int] = []
    t_start = time.perf_counter()
    passes_before = target.session.forward_passes
    target.start(prompt, fuse_prefill)
    if drafter is not None:
        drafter.start(prompt)
    _sync(device)
    stats.time_prefill = time.perf_counter() - t_start
    while len(out) < max_new_tokens:
        t0 = time.perf_counter()
        room = min(gamma, max_new_tokens - len(out) - 1)  # never draft past the budget
        proposal = drafter.propose(room, sampling, generator) if drafter is not None and room > 0 else None
        draft = proposal.tokens if proposal is not None else torch.empty(0, dtype=torch.long)
        t1 = time.perf_counter()
        logits = target.score(draft.tolist())  # [k + 1, vocab]
        p = sampling.probs(logits)  # float32 [k + 1, vocab]
        verdict = verify(p, proposal.q if proposal is not None else None, draft.to(p.device),
                         generator, lenience)
        new = verdict.tokens.tolist()
        target.commit(verdict.n_accepted, new)
        t2 = time.perf_counter()
        if drafter is not None:
            drafter.commit(verdict.n_accepted, new)
        stats.time_draft += (t1 - t0) + (time.perf_counter() - t2)
        stats.time_verify += t2 - t1
        stats.record(len(draft), verdict.n_accepted, verdict.bonus and len(draft) > 0)
        out.extend(new)
        if eos_id is not None and eos_id in new:
            del out[out.index(eos_id) + 1:]
            break
    del out[max_new_tokens:]
    _sync(device)
    stats.time_total = time.perf_counter() - t_start
    stats.new_tokens = len(out)
    stats.target_passes = target.session.forward_passes - passes_before  # the prefill included
    return DecodeResult(out, stats)


def autoregressive_decode(target: TargetScorer, prompt: Sequence[int], max_new_tokens: int,
                          sampling: SamplingConfig, generator: torch.Generator | None,
                          eos_id: int | None = None, fuse_prefill: bool = False) -> DecodeResult:
    """The baseline: one target pass per token, same cache handling and sampling."""
    return speculative_decode(target, None, prompt, max_new_tokens, 0, sampling, generator, eos_id,
                              fuse_prefill=fuse_prefill)
