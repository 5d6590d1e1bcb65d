"""The target's own continuations of prompts, sampled in batches with the project's sampling
transform, one generator per prompt (exactly `new_tokens` each; EOS is not a stop). The batch is
decoded by the one decode step (`specdec.reference.core.step`) with no drafter: the same
scorer, cache, sampling and verdicts as every decode. Why not Hugging Face `generate`:
docs/estimator.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import torch

from specdec.reference.core.policy import FixedGamma
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.prompt import as_prompt
from specdec.reference.core.rules import SpeculativeSampling
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seeds import prompt_generators
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.step import Request, StageClock, Step
from specdec.reference.drafters.protocol import NoDrafter


@dataclass(frozen=True)
class TargetSamples:
    """Prompts and the continuations the target sampled for them.

    prompts: token ids of each prompt.
    continuations: the sampled ids after each prompt, each exactly new_tokens long.
    sampling: the transform the continuations were drawn with.
    seconds: wall time of the generation.
    """

    prompts: list[Sequence[int]]  # each a list of ids, or a TokenPrompt with its encoder input
    continuations: list[list[int]]
    sampling: SamplingConfig
    seconds: float = 0.0
    sources: list[str] = field(default_factory=list)  # where each prompt came from (informational)

    @property
    def n_positions(self) -> int:
        return sum(len(c) for c in self.continuations)

    def sequences(self) -> list[list[int]]:
        """prompt + continuation for every sample."""
        return [p + c for p, c in zip(self.prompts, self.continuations)]


@torch.inference_mode()
def generate_batch(model: torch.nn.Module, prompts: Sequence[Sequence[int]], new_tokens: int,
                   sampling: SamplingConfig, numbers: Sequence[int], seed: int | None) -> list[list[int]]:
    """Sample new_tokens ids after each prompt, the prompts in one batch of slots, one decode step
    (no drafts: the pending token's row, drawn as a verdict) per token, the first step's pass
    encoding every prompt. Prompt j draws from its own generator seeded (seed, numbers[j])
    (argmax at temperature 0: nothing drawn)."""
    from specdec.reference.model.batch_scorer import slot_scorer

    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt must contain at least one token")
    target = slot_scorer(model, len(prompts), max(len(p) for p in prompts) + new_tokens + 1, fuse_prefill=True)
    step = Step(target, NoDrafter().slots(len(prompts), 0), FixedGamma(0), sampling, SpeculativeSampling(),
                DecodeStats(0), StageClock(target.output_device))
    generators = [None] * len(prompts) if seed is None else prompt_generators(seed, numbers, target.output_device)
    requests = [Request(n, new_tokens, g) for n, g in zip(numbers, generators)]
    for slot, prompt in enumerate(prompts):
        step.start(slot, prompt)
    while not all(r.done for r in requests):
        step(requests)
    return [r.tokens for r in requests]


def generate_continuations(model: torch.nn.Module, prompts: Sequence[Sequence[int]], new_tokens: int,
                           sampling: SamplingConfig, seed: int | None, batch_size: int = 16,
                           progress: bool = False, sources: Sequence[str] | None = None,
                           indices: Sequence[int] | None = None) -> TargetSamples:
    """Sample a continuation of new_tokens ids for every prompt, batch_size prompts at a time.

    Prompt j (global index indices[j], default j) draws from its own generator seeded from
    (seed, index): its continuation does not depend on which other prompts share its batch
    or process. seed may be None at temperature 0 (nothing is drawn). Prompts may differ in
    length (each slot holds its own).
    """
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be >= 1, got {new_tokens}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not sampling.greedy and seed is None:
        raise ValueError("sampling at temperature > 0 needs a seed")
    indices = list(range(len(prompts))) if indices is None else list(indices)
    if len(indices) != len(prompts):
        raise ValueError(f"{len(indices)} indices for {len(prompts)} prompts")
    start = time.perf_counter()
    continuations: list[list[int]] = []
    bar = progress_bar(len(prompts) * new_tokens, f"sampling the target (T={sampling.temperature:g})", "tok",
                       progress)
    for b in range(0, len(prompts), batch_size):
        batch = prompts[b:b + batch_size]
        continuations.extend(generate_batch(model, batch, new_tokens, sampling, indices[b:b + batch_size],
                                            None if sampling.greedy else seed))
        bar.update(len(batch) * new_tokens)
    bar.close()
    return TargetSamples([as_prompt(p) for p in prompts], continuations, sampling, time.perf_counter() - start,
                         list(sources) if sources is not None else [])
