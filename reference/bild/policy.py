"""Big Little Decoder (Kim et al., NeurIPS 2023): the fallback and rollback policies.

The little model is any drafter, the large model the target; p_L is the target's
distribution, p_S the little model's, alpha_fb / alpha_rb the fallback / rollback
thresholds. Fallback is the loop's `ConfidenceThreshold` draft-length policy
(`BildPolicy.draft_policy`); rollback is `BildRollback`, an acceptance rule of the one decode
loop (`specdec.reference.core.loop`). BiLD with any
rollback but "argmax" is NOT exact. The method: docs/bild.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.bild.rollback import ARGMAX
from specdec.reference.core.loop import DecodeResult, decode
from specdec.reference.core.policy import ConfidenceThreshold
from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.core.scorer import Scorer
from specdec.reference.core.seams import Proposal, Verdict
from specdec.reference.drafters.protocol import Drafter



@dataclass(frozen=True)
class BildPolicy:
    """When the little model hands over, and when the large model rolls it back.

    fallback: alpha_fb in [0, 1]; the little model stops before a token whose top
        probability is below it. 0 = no fallback policy (hand over every max_little_steps).
    rollback: alpha_rb >= 0 in nats: roll back at the first little token y_S with
        -log p_L(y_S) > alpha_rb; math.inf = no rollback policy; "argmax" = roll back any
        y_S != argmax p_L (greedy BiLD then equals greedy target decoding).
    max_little_steps: most little tokens per large-model pass (the paper keeps 10).
    keep_argmax: never roll back a little token equal to argmax p_L (see the module doc).
    """

    fallback: float = 0.5
    rollback: float | str = 3.0
    max_little_steps: int = 10
    keep_argmax: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.fallback <= 1.0:
            raise SpecdecError(f"the fallback threshold must be in [0, 1], got {self.fallback}")
        if self.rollback != ARGMAX and not (isinstance(self.rollback, (int, float)) and self.rollback >= 0):
            raise SpecdecError(f"the rollback threshold must be >= 0 (nats), inf or {ARGMAX!r}, got {self.rollback!r}")
        if self.max_little_steps < 1:
            raise SpecdecError(f"max_little_steps must be >= 1, got {self.max_little_steps}")

    @property
    def draft_policy(self) -> ConfidenceThreshold:
        """The fallback as the loop's draft-length rule: at most max_little_steps little tokens,
        stopping before one whose top probability is below alpha_fb."""
        return ConfidenceThreshold(self.fallback, 0, self.max_little_steps)

    def rollback_label(self) -> str:
        """The rollback setting as text ('argmax', 'inf', '2')."""
        if self.rollback == ARGMAX:
            return ARGMAX
        return "inf" if math.isinf(self.rollback) else f"{self.rollback:g}"


def check_fallback(policy: BildPolicy, drafter: Drafter) -> None:
    """A fallback threshold needs a drafter that stops its drafts on confidence (`fallback`)."""
    if policy.fallback > 0 and not drafter.fallback:
        raise SpecdecError(f"{type(drafter).__name__} does not stop its drafts on confidence (it never asks "
                           "keep_going), so it cannot fall back; use fallback 0 (hand over every max_little_steps "
                           "tokens)")


def first_rollback(logits: torch.Tensor, draft: torch.Tensor, rollback: float | str,
                   keep_argmax: bool = True) -> int:
    """The rollback position m (0-based), or k when every little token is kept.

    Args:
        logits: [k + 1, vocab] large-model logits; row i predicts draft[i] (row k: the token
            after the drafts).
        draft: LongTensor [k] little tokens y_S.
        rollback: alpha_rb in nats (inf: never), or "argmax".
        keep_argmax: a little token equal to argmax p_L is never rolled back.
    """
    k = int(draft.shape[0])
    if k == 0 or (rollback != ARGMAX and math.isinf(rollback)):
        return k
    differs = draft != logits[:k].argmax(-1)  # [k]
    if rollback == ARGMAX:
        bad = differs
    else:
        log_p = logits[:k].float().log_softmax(-1)  # [k, vocab] unadjusted log p_L
        distance = -log_p[torch.arange(k, device=log_p.device), draft]  # [k]  d = -log p_L(y_S)
        bad = distance > rollback
        if keep_argmax:
            bad &= differs
    hits = bad.nonzero()
    return int(hits[0, 0]) if hits.numel() else k


def large_token(logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None) -> int:
    """The large model's token from one row of logits [vocab]; greedy draws no random numbers."""
    if sampling.greedy:
        return int(logits.argmax())
    return int(sample(sampling.probs(logits), generator))


@dataclass(frozen=True)
class BildRollback:
    """BiLD's acceptance rule: keep the little tokens before the first rollback position m,
    then emit the large model's own token at m (drawn with the sampling transform from p_L)."""

    policy: BildPolicy

    def __call__(self, logits: Sequence[torch.Tensor], proposals: Sequence[Proposal], sampling: SamplingConfig,
                 generators: Sequence[torch.Generator | None]) -> list[Verdict]:
        return [self.verdict(*row, sampling) for row in zip(logits, proposals, generators)]

    def verdict(self, logits: torch.Tensor, proposal: Proposal, generator: torch.Generator | None,
                sampling: SamplingConfig) -> Verdict:
        """One request's verdict. logits: [k + 1, vocab]."""
        draft = proposal.tokens.to(logits.device)  # [k]
        m = first_rollback(logits, draft, self.policy.rollback, self.policy.keep_argmax)
        token = torch.tensor([large_token(logits[m], sampling, generator)], device=draft.device)
        return Verdict(m, torch.cat([draft[:m], token]), bonus=m == len(draft))


def bild_decode(target: Scorer, drafter: Drafter, prompt: Sequence[int], max_new_tokens: int,
                policy: BildPolicy, sampling: SamplingConfig, generator: torch.Generator | None,
                eos_id: int | None = None) -> DecodeResult:
    """Generate up to max_new_tokens after `prompt` with BiLD (stops after eos_id if given).

    The little model's tokens are drawn with `sampling` from its adjusted distribution (its
    argmax when greedy), the large model's token likewise from p_L. `result.from_drafter`
    marks the little model's kept tokens.
    """
    check_fallback(policy, drafter)
    return decode(target, drafter, prompt, max_new_tokens, policy.draft_policy, sampling, generator,
                  BildRollback(policy), eos_id)
