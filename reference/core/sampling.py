"""Sampling transforms applied identically to the target p and the draft q (Sec. 2.2).

Leviathan et al. note that temperature, top-k and top-p sampling are standard sampling
from an *adjusted* distribution; speculative sampling stays exact as long as the same
adjustment is applied to both p (target) and q (draft). Temperature 0 is argmax: the
adjusted distribution is one-hot. All outputs are float32 probabilities, whatever the
logits' dtype, so acceptance ratios are computed in float32 or better.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from specdec.errors import SpecdecError


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become the distribution that is sampled from.

    temperature: 0 means greedy (argmax, one-hot distribution); > 0 divides the logits.
    top_k: keep the k most likely tokens (0 = off).
    top_p: keep the smallest set of most likely tokens whose mass reaches top_p (1 = off).
    min_p: keep the tokens at least min_p times as likely as the most likely one (0 = off).

    Applied in that order after the temperature. llama-server's default sampler (top-k 40, top-p
    0.95, min-p 0.05: common/common.h) truncates before its temperature instead: the same at T = 1.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):
            raise SpecdecError(f"temperature must be finite and >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise SpecdecError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise SpecdecError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise SpecdecError(f"min_p must be in [0, 1], got {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Adjusted distribution. logits [..., vocab] -> float32 probabilities [..., vocab]."""
        logits = logits.float()
        if self.greedy:
            out = torch.zeros_like(logits)
            return out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        # shift by the row maximum first: (l - max) / T <= 0 never overflows, however small T
        # is (exp(0) = 1 at the maximum, so no NaN); T -> 0 tends to uniform over the argmaxes
        logits = (logits - logits.max(-1, keepdim=True).values) / self.temperature
        if self.top_k and self.top_k < logits.shape[-1]:
            kth = torch.topk(logits, self.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
            cum = sorted_logits.softmax(-1).cumsum(-1)
            # drop a token when the mass before it already reaches top_p (keeps >= 1 token)
            drop_sorted = (cum - sorted_logits.softmax(-1)) >= self.top_p
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            logits = logits.masked_fill(drop, float("-inf"))
        if self.min_p > 0:
            # p_i >= min_p p_max  <=>  l_i >= log(min_p): the logits were shifted so that the row maximum,
            # which every cut keeps, is 0
            logits = logits.masked_fill(logits < math.log(self.min_p), float("-inf"))
        return logits.softmax(-1)


def sample(probs: torch.Tensor, generator: torch.Generator | Sequence[torch.Generator] | None) -> torch.Tensor:
    """Draw one token per row by inverting the float64 CDF. probs [..., vocab] -> LongTensor [...].

    Exact for any non-negative weights (they need not sum to 1; zero-weight tokens are never
    drawn), one uniform per row from `generator` (or, given one generator per row, row b's
    uniform from generator[b]), and ~20x cheaper than torch.multinomial over a 49k
    vocabulary (0.13 vs 2.4 ms, measured on one CPU thread).
    """
    flat = probs.reshape(-1, probs.shape[-1])
    cdf = flat.double().cumsum(-1)  # [rows, vocab]
    if isinstance(generator, Sequence):
        if len(generator) != flat.shape[0]:
            raise ValueError(f"{len(generator)} generators for {flat.shape[0]} rows")
        u = torch.cat([uniform((1, 1), g, probs.device, torch.float64) for g in generator])
    else:
        u = uniform((flat.shape[0], 1), generator, probs.device, torch.float64)
    idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)  # [rows, 1]
    over = idx[:, 0] >= flat.shape[-1]  # u * total rounded up to the total (~1e-16 chance)
    if over.any():
        last = flat.shape[-1] - 1 - (flat.flip(-1) > 0).long().argmax(-1, keepdim=True)
        idx = torch.where(over[:, None], last, idx)
    return idx.reshape(probs.shape[:-1])


def uniform(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device,
            dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Uniforms in [0, 1) drawn on the generator's own device, then moved to `device` (where the
    probabilities are): the draws depend on the generator alone, wherever a split model's
    logits come out."""
    where = device if generator is None else generator.device
    return torch.rand(shape, generator=generator, dtype=dtype, device=where).to(device)
