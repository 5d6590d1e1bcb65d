"""The estimator's per-prompt work, chunk by chunk: sample the target's continuation of each
prompt (its own generator, seeded from the global seed and the prompt's index) and score it
teacher-forced against each drafter. A share is any set of chunks (one rank's, or all of
them); shares merge, in prompt order, into exactly what one process computes
(docs/distributed.md).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.prompt import as_prompt
from specdec.reference.estimate.samples import TargetSamples, generate_continuations
from specdec.reference.estimate.teacher_forced import PositionScores, score_positions


@dataclass
class ScoredPrompts:
    """Samples and teacher-forced scores of some prompts.

    indices: the prompts' global indices, increasing; samples.prompts[j] is prompt indices[j].
    scores: drafter name -> one PositionScores per prompt, in the same order.
    scoring_seconds: time spent scoring by the process(es) that computed them (summed over
        ranks after a merge; samples.seconds is the same for sampling).
    """

    indices: list[int]
    samples: TargetSamples
    scores: dict[str, list[PositionScores]]
    scoring_seconds: float = 0.0
    ranks: list[dict[str, Any]] = field(default_factory=list)  # per rank: prompts, seconds

    @property
    def generation_seconds(self) -> float:
        return self.samples.seconds


def score_chunks(model: torch.nn.Module, drafters: Mapping[str, Any], prompts: Sequence[Sequence[int]],
                 chunks: Sequence[range], new_tokens: int, sampling: SamplingConfig, seed: int, vocab_size: int,
                 lenience: Sequence[float], score_batch: int, max_gamma: int,
                 generator: torch.Generator | None = None, progress: bool = False,
                 sources: Sequence[str] = (), confidence_top_k: int = 0) -> ScoredPrompts:
    """Sample and score the prompts of `chunks` (ranges of indices into `prompts`).

    Each chunk is one generation batch and is scored in batches of score_batch inside it, so
    a chunk's numbers do not depend on which other chunks this process has. generator serves
    protocol drafters that draw (their draws do not enter beta). confidence_top_k > 0: the
    drafters' confidence renormalised over their top k (`teacher_forced.top_confidence`; the
    scorers that report a confidence have the attribute, any other is refused).
    """
    indices = [i for chunk in chunks for i in chunk]
    bar = progress_bar(len(indices) * new_tokens, f"sampling and scoring (T={sampling.temperature:g}, "
                       f"{len(indices)} of {len(prompts)} prompts)", "tok", progress)
    scorers = {name: d.teacher_forced_scorer(model, max_gamma, generator) for name, d in drafters.items()}
    for name, scorer in scorers.items() if confidence_top_k else ():
        if not hasattr(scorer, "confidence_top_k"):
            raise SpecdecError(f"{name}: its scorer reports no confidence to renormalise over a top k")
        scorer.confidence_top_k = confidence_top_k
    continuations: list[list[int]] = []
    scores: dict[str, list[PositionScores]] = {name: [] for name in drafters}
    generation = scoring = 0.0
    for chunk in chunks:
        start = time.perf_counter()
        samples = generate_continuations(model, [prompts[i] for i in chunk], new_tokens, sampling, seed,
                                         batch_size=len(chunk), indices=chunk)
        generation += time.perf_counter() - start
        start = time.perf_counter()
        for name, scorer in scorers.items():
            scores[name].extend(score_positions(model, scorer, samples, sampling, vocab_size, lenience, score_batch,
                                                max_gamma))
        scoring += time.perf_counter() - start
        continuations.extend(samples.continuations)
        bar.update(len(chunk) * new_tokens)
    bar.close()
    samples = TargetSamples([as_prompt(prompts[i]) for i in indices], continuations, sampling, generation,
                            [sources[i] for i in indices] if sources else [])
    return ScoredPrompts(indices, samples, scores, scoring,
                         [{"prompts": len(indices), "generation_seconds": generation, "scoring_seconds": scoring}])


def merge(parts: Sequence[ScoredPrompts], n_prompts: int) -> ScoredPrompts:
    """One ScoredPrompts over every prompt, in index order, from disjoint shares that together
    hold prompts 0..n_prompts-1 (anything else is an error: a prompt lost or counted twice)."""
    rows = sorted((i, part, j) for part in parts for j, i in enumerate(part.indices))
    if [i for i, _, _ in rows] != list(range(n_prompts)):
        raise ValueError(f"the shares hold prompts {[i for i, _, _ in rows][:8]}..., not exactly 0..{n_prompts - 1}")
    names = list(parts[0].scores) if parts else []
    first = parts[0].samples
    samples = TargetSamples([part.samples.prompts[j] for _, part, j in rows],
                            [part.samples.continuations[j] for _, part, j in rows], first.sampling,
                            sum(part.generation_seconds for part in parts),
                            [part.samples.sources[j] for _, part, j in rows] if first.sources else [])
    return ScoredPrompts(list(range(n_prompts)), samples,
                         {name: [part.scores[name][j] for _, part, j in rows] for name in names},
                         sum(p.scoring_seconds for p in parts),
                         [r for p in parts for r in p.ranks])
