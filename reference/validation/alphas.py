"""The validation's alpha part: for every temperature, the target's continuations of the
estimator's prompts and each drafter's teacher-forced scores on them. It is the part a
torchrun job splits over processes (a share of the prompts each); rank 0 merges the shares
and summarizes them exactly as one process would (docs/distributed.md)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from specdec.reference.model.placement import output_device
from specdec.reference.core.seeds import derive_seed
from specdec.reference.estimate.alpha import AlphaEstimate, alpha_from_scores
from specdec.reference.estimate.samples import TargetSamples
from specdec.reference.estimate.shares import ScoredPrompts, merge, score_chunks
from specdec.reference.validation.config import ValidationConfig

SCORE_BATCH = 8  # sequences per teacher-forced pass


def score_alpha_share(target, drafters: Mapping[str, Any], alpha_prompts: Sequence[Sequence[int]],
                      chunks: Sequence[range], config: ValidationConfig, progress: bool = False
                      ) -> dict[float, ScoredPrompts]:
    """This process's share (`chunks` of alpha_prompts) at every temperature of the config.

    target: a LoadedModel. The prompts' generators are seeded from (seed, temperature index,
    prompt index), so a share's numbers do not depend on how the prompts were split.
    """
    gamma_top = config.draft_top  # the per-position confidence law needs a row per drafted position
    out = {}
    for ti, temperature in enumerate(config.temperatures):
        draws = torch.Generator(device=output_device(target.model)).manual_seed(derive_seed(config.seed, ti, 2))
        out[temperature] = score_chunks(target.model, drafters, alpha_prompts, chunks, config.alpha_new_tokens,
                                        config.sampling(temperature), derive_seed(config.seed, ti, 1),
                                        target.vocab_size, config.lenience, SCORE_BATCH, gamma_top, draws, progress)
    return out


def summarize_alphas(shares: Sequence[dict[float, ScoredPrompts]], n_prompts: int, names: Sequence[str],
                     config: ValidationConfig) -> tuple[dict[tuple[str, float], AlphaEstimate], dict[float, TargetSamples]]:
    """Merge every process's shares and estimate alpha per (drafter, temperature); also the
    merged samples per temperature (their first sequence is the timing context)."""
    alphas, samples = {}, {}
    for ti, temperature in enumerate(config.temperatures):
        merged = merge([share[temperature] for share in shares], n_prompts)
        samples[temperature] = merged.samples
        for di, name in enumerate(names):
            rng = np.random.default_rng(derive_seed(config.seed, ti, 4, di))
            alphas[(name, temperature)] = alpha_from_scores(merged.scores[name], config.lenience, rng,
                                                            config.bootstrap, max_gamma=config.draft_top)
    return alphas, samples
