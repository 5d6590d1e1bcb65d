"""The target's own continuations of prompts, sampled in batches with the project's sampling
transform and the caller's generator (exactly `new_tokens` each; EOS is not a stop).
Why not Hugging Face `generate`: docs/estimator.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import torch

from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.core.prompt import as_prompt
from specdec.reference.model.seq2seq import ModelPass, new_cache, with_cache


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


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask, both LongTensor [B, max_len]."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        if len(p):
            ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p):] = 1
    return ids, mask


@torch.inference_mode()
def generate_batch(model: torch.nn.Module, prompts: Sequence[Sequence[int]], new_tokens: int,
                   sampling: SamplingConfig, generators: Sequence[torch.Generator] | None) -> list[list[int]]:
    """Sample new_tokens ids after each prompt in one batch (KV cache, left padding).

    Returns B lists of exactly new_tokens ids. Row b of each step is drawn from
    sampling.probs(logits[b]) with generators[b], one per prompt (argmax at temperature 0:
    nothing drawn, generators may be None). An encoder-decoder's prompts are its decoder's
    prefixes (all of one length: decoder positions follow the cache, so no left padding), each
    with its source encoded once.
    """
    from specdec.reference.model.placement import input_device

    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt must contain at least one token")
    if not sampling.greedy and (generators is None or len(generators) != len(prompts)):
        raise ValueError("sampling at temperature > 0 needs one generator per prompt")
    ids, mask = left_pad(prompts)
    ids, mask = ids.to(input_device(model)), mask.to(input_device(model))
    cache = new_cache(model)
    run = ModelPass(model, prompts)
    padded = run.padding(mask)
    out = run(ids, 1, **with_cache(model, cache), **padded)
    produced: list[torch.Tensor] = []
    for step in range(new_tokens):
        p = sampling.probs(out.logits[:, -1])  # [B, vocab] float32, on the output device
        x = p.argmax(-1) if sampling.greedy else sample(p, generators)  # [B]
        produced.append(x)
        if step == new_tokens - 1:
            break
        if padded:
            padded = {"attention_mask": torch.cat([padded["attention_mask"], mask.new_ones(mask.shape[0], 1)], dim=1),
                      "position_ids": padded["position_ids"][:, -1:] + 1}  # [B, 1]
        out = run(x[:, None].to(ids.device), 1, **with_cache(model, cache), **padded)
    return torch.stack(produced, dim=1).tolist() if produced else [[] for _ in prompts]


def generate_continuations(model: torch.nn.Module, prompts: Sequence[Sequence[int]], new_tokens: int,
                           sampling: SamplingConfig, seed: int | None, batch_size: int = 16,
                           progress: bool = False, sources: Sequence[str] | None = None,
                           indices: Sequence[int] | None = None) -> TargetSamples:
    """Sample a continuation of new_tokens ids for every prompt, batch_size prompts at a time.

    Prompt j (global index indices[j], default j) draws from its own generator seeded from
    (seed, index): its continuation does not depend on which other prompts share its batch
    or process. seed may be None at temperature 0 (nothing is drawn). Prompts of equal length
    need no padding; the held-out prompts all have the same length.
    """
    from specdec.reference.model.placement import output_device
    from specdec.reference.core.seeds import prompt_generators

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
    device = output_device(model)
    for b in range(0, len(prompts), batch_size):
        batch = prompts[b:b + batch_size]
        generators = None if sampling.greedy else prompt_generators(seed, indices[b:b + batch_size], device)
        continuations.extend(generate_batch(model, batch, new_tokens, sampling, generators))
        bar.update(len(batch) * new_tokens)
    bar.close()
    return TargetSamples([as_prompt(p) for p in prompts], continuations, sampling, time.perf_counter() - start,
                         list(sources) if sources is not None else [])
