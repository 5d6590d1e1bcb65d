"""The cost side of speculative decoding as one value: c, c_hat, v(k) and the loop overhead.

Names follow Leviathan et al. (ICML 2023): `c` = time of one draft step / time of one target
step (Definition 7), `c_hat` = arithmetic operations per token of the draft / of the target
(Theorem 10), v(k) the verify-cost curve, o(k) the decode loop's own time per iteration.
`assemble_cost` is the one place a `CostEstimate` is put together (used by `specdec
estimate` and the validation). The method: docs/estimator.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from specdec.reference.model.models import flops_per_token
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.estimate.timing import (DraftTiming, StepOverhead, TargetTiming, time_contexts,
                                               time_draft_steps, time_step_overhead)


def c_hat_for(drafter, target: torch.nn.Module) -> float:
    """Arithmetic ratio c_hat of a drafter to the target: the drafter counts its own operations
    (`Drafter.c_hat`); prompt lookup and other copy drafters count none."""
    return drafter.c_hat(flops_per_token(target))


@dataclass
class CostEstimate:
    """c, c_hat, v(k) and the loop overheads for one drafter at one sampling setting.

    overhead_seconds[k]: decoder loop seconds per iteration with k drafts (k = 0..K-1);
    overhead[k] the same in target steps (/ t(1)); overhead_tail_seconds[k]: the part of it that is
    the passes' mean over their median (`StepOverhead.tail`; None where not timed apart).
    """

    c: float
    c_hat: float
    target: TargetTiming
    draft: DraftTiming | None
    overhead_seconds: list[float]
    overhead_tail_seconds: list[float] | None = None

    @property
    def verify_cost(self) -> list[float]:
        return self.target.verify_cost

    @property
    def overhead(self) -> list[float]:
        return [o / self.target.step_seconds for o in self.overhead_seconds]

    def to_dict(self) -> dict[str, Any]:
        return {"c": self.c, "c_hat": self.c_hat, "context_tokens": self.target.context_tokens,
                "target_step_seconds": self.target.step_seconds,
                "draft_token_seconds": None if self.draft is None else self.draft.token_seconds,
                "verify_cost": self.verify_cost, "verify_seconds": self.target.seconds,
                "verify_spread": self.target.spread, "crop_seconds": self.target.crop_seconds,
                "overhead_seconds": self.overhead_seconds, "overhead": self.overhead,
                "overhead_tail_seconds": self.overhead_tail_seconds,
                "draft": None if self.draft is None else self.draft.to_dict(),
                "repeats": self.target.repeats, "threads": self.target.threads, "device": self.target.device}


def assemble_cost(drafter, target: torch.nn.Module, timing: TargetTiming, draft: DraftTiming,
                  overhead: StepOverhead) -> CostEstimate:
    """The one place a CostEstimate is put together: c = draft seconds per token / t(1), each
    drafting cycle against the target pass timed beside it (`DraftTiming.c`)."""
    return CostEstimate(draft.c, c_hat_for(drafter, target), timing, draft, overhead.seconds, list(overhead.tail))


def estimate_cost(target: torch.nn.Module, drafter, tokens: Sequence[int], sampling: SamplingConfig,
                  context_tokens: int = 128, max_k: int = 16, repeats: int = 7, draft_gamma: int = 4,
                  draft_repeats: int = 20, generator: torch.Generator | None = None,
                  other_contexts: Sequence[int] = ()) -> tuple[CostEstimate, list[TargetTiming]]:
    """c (timed), c_hat (counted), v(1..max_k) and loop overheads o(0..max_k-1) at context_tokens;
    and t(1..max_k) at context_tokens and each of other_contexts (timed together, interleaved:
    `time_contexts`), in increasing length.

    tokens: real token ids for the contexts (e.g. a held-out prompt and its continuation).
    """
    lengths = sorted({context_tokens, *other_contexts})
    timings = time_contexts(target, tokens, lengths, max_k, repeats)
    timing = timings[lengths.index(context_tokens)]
    draft = time_draft_steps(drafter, target, tokens, sampling, context_tokens, draft_gamma, draft_repeats,
                             generator=generator)
    overhead = time_step_overhead(target, tokens, context_tokens, sampling, max_k, generator=generator)
    return assemble_cost(drafter, target, timing, draft, overhead), timings
