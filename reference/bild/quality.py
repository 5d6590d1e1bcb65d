"""Quality of generated text measured against the target, stored as counts: `Agreement`
with the target's greedy output and `TargetFit`, the target's teacher-forced scores
(docs/bild.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from specdec.reference.model.seq2seq import ModelPass


@dataclass(frozen=True)
class Agreement:
    """Agreement counts with the target's greedy output, summed over `prompts` prompts."""

    matched: int = 0  # positions i < len(reference) with tokens[i] == reference[i]
    compared: int = 0  # sum of len(reference)
    prefix: int = 0  # sum of exact-match prefix lengths
    prompts: int = 0

    def __add__(self, other: "Agreement") -> "Agreement":
        return Agreement(self.matched + other.matched, self.compared + other.compared,
                         self.prefix + other.prefix, self.prompts + other.prompts)

    def match_rate(self) -> float:
        """Matched / compared positions (1.0 = the target's greedy text)."""
        return self.matched / self.compared if self.compared else float("nan")

    def mean_prefix(self) -> float:
        """Mean exact-match prefix length in tokens per prompt."""
        return self.prefix / self.prompts if self.prompts else float("nan")


def greedy_agreement(tokens: Sequence[int], reference: Sequence[int]) -> Agreement:
    """Compare generated `tokens` with the target's greedy `reference` (one prompt)."""
    n = len(reference)
    same = [a == b for a, b in zip(tokens[:n], reference)]
    prefix = same.index(False) if False in same else len(same)
    return Agreement(matched=sum(same), compared=n, prefix=prefix, prompts=1)


@dataclass(frozen=True)
class TargetFit:
    """Teacher-forced target scores of generated tokens, summed over prompts."""

    log_likelihood: float = 0.0  # sum of log p(x_t | prefix) in nats
    argmax_hits: int = 0  # tokens equal to argmax p(. | prefix)
    tokens: int = 0

    def __add__(self, other: "TargetFit") -> "TargetFit":
        return TargetFit(self.log_likelihood + other.log_likelihood, self.argmax_hits + other.argmax_hits,
                         self.tokens + other.tokens)

    def mean_log_likelihood(self) -> float:
        """Mean log p per generated token in nats (higher = more target-like)."""
        return self.log_likelihood / self.tokens if self.tokens else float("nan")

    def argmax_rate(self) -> float:
        """Fraction of generated tokens that are the target's greedy choice in context."""
        return self.argmax_hits / self.tokens if self.tokens else float("nan")


@torch.inference_mode()
def target_fit(model: torch.nn.Module, prompt: Sequence[int], tokens: Sequence[int]) -> TargetFit:
    """Score `tokens` after `prompt` with one forward pass of the target (no KV cache).

    Args:
        model: a Hugging Face language model (the target; an encoder-decoder's decoder scores
            `tokens` with the prompt's source encoded).
        prompt: the prompt's ids (at least one).
        tokens: the generated ids x_1..x_n.
    """
    if len(prompt) == 0:
        raise ValueError("the prompt must contain at least one token")
    n = len(tokens)
    if n == 0:
        return TargetFit()
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt) + list(tokens)], dtype=torch.long, device=device)  # [1, P + n]
    # row i of the last n + 1 rows predicts the token after position P - 1 + i
    logits = ModelPass(model, [prompt])(ids, n + 1).logits[0, :n].float()  # [n, vocab]
    x = ids[0, -n:]  # [n]
    log_p = logits.log_softmax(-1)[torch.arange(n, device=device), x]  # [n]
    hits = logits.argmax(-1) == x
    return TargetFit(float(log_p.double().sum()), int(hits.sum()), n)
