"""Big Little Decoder (Kim et al., NeurIPS 2023): fallback and rollback policies.

Names follow the BiLD paper where it has them and Leviathan et al. otherwise: the *little*
model is any drafter (reference.drafter protocol: a small neural LM, a KenLM n-gram model,
prompt lookup), the *large* model is the target, scored by the same TargetScorer as
speculative decoding; p_L is the target's distribution, p_S the little model's; alpha_fb
and alpha_rb are the fallback and rollback thresholds.

One iteration (Algorithm 1 of the paper, with the little model's steps batched):

1. Fallback (Sec. 3.3): the little model drafts until it is unsure, i.e. it stops before
   the first token whose top probability max_y p_S(y | y_<n) is below alpha_fb, or after
   max_little_steps tokens, whichever comes first (`propose(..., min_confidence=alpha_fb)`).
2. The large model runs ONE pass over the pending token and the k little tokens y_S,
   giving p_L at every little position and at the position after them. [k + 1, vocab]
3. Rollback (Sec. 3.4): the first little position m with d(y_S,m, p_L,m) > alpha_rb, where
   d = -log p_L(y_S) (the cross-entropy of the small model's hard label under the large
   model's soft label, Sec. 4.1), is replaced by the large model's token there and every
   little token after it is discarded. With no such m, all k little tokens are kept and
   the large model adds its token at position k (the fallback point). A little token that
   IS the large model's argmax is never rolled back (keep_argmax, on by default, as in the
   authors' code: replacing it by itself would only discard the tokens after it); with
   keep_argmax=False the paper's text is followed literally.
4. Both KV caches are cropped to the kept prefix through `commit`.

The distance and the confidence use the models' unadjusted distributions (softmax of the
logits at temperature 1); the sampling transform (greedy, temperature, top-k, top-p)
applies only to the token the large model emits. `rollback="argmax"` is the strictest
policy: any little token that differs from argmax p_L is rolled back, so greedy BiLD then
outputs exactly the target's greedy text (it is greedy speculative decoding with a
confidence-sized draft window). BiLD with any other rollback threshold is NOT exact: its
output follows neither p_L nor p_S, which is the point (quality traded for speed).

Ablations (Sec. 4.3, Fig. 5): no rollback is alpha_rb = inf; no fallback is alpha_fb = 0,
so control passes to the large model every max_little_steps tokens.
"""
from __future__ import annotations

import inspect
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

import torch

from reference.drafter import Drafter
from reference.sampling import SamplingConfig, sample
from reference.target import TargetScorer

ARGMAX = "argmax"


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
            raise ValueError(f"the fallback threshold must be in [0, 1], got {self.fallback}")
        if self.rollback != ARGMAX and not (isinstance(self.rollback, (int, float)) and self.rollback >= 0):
            raise ValueError(f"the rollback threshold must be >= 0 (nats), inf or {ARGMAX!r}, got {self.rollback!r}")
        if self.max_little_steps < 1:
            raise ValueError(f"max_little_steps must be >= 1, got {self.max_little_steps}")

    @classmethod
    def parse_rollback(cls, text: str) -> float | str:
        """'2.5' -> 2.5; 'inf' or 'none' -> math.inf; 'argmax' -> 'argmax'."""
        t = text.strip().lower()
        if t == ARGMAX:
            return ARGMAX
        if t in ("inf", "none", "off"):
            return math.inf
        try:
            return float(t)
        except ValueError:
            raise ValueError(f"rollback threshold {text!r}: expected a number of nats, inf or {ARGMAX!r}") from None

    def rollback_label(self) -> str:
        """The rollback setting as text ('argmax', 'inf', '2')."""
        if self.rollback == ARGMAX:
            return ARGMAX
        return "inf" if math.isinf(self.rollback) else f"{self.rollback:g}"


@dataclass
class BildStats:
    """Counts of one or more BiLD runs; every rate is derived by a method.

    An iteration is one large-model pass (one handover). proposed_hist[k] counts iterations
    in which the little model proposed k tokens, kept_hist[m] those in which m of them were
    kept (m < k exactly when the large model rolled back).
    """

    max_little_steps: int
    iterations: int = 0
    new_tokens: int = 0
    little_proposed: int = 0
    little_kept: int = 0
    rollbacks: int = 0
    # iterations where the little model proposed fewer than it was allowed (fallback on
    # confidence, or a drafter that ran out: EOS, no prompt-lookup match)
    short_proposals: int = 0
    proposed_hist: list[int] = field(default_factory=list)  # [max_little_steps + 1]
    kept_hist: list[int] = field(default_factory=list)  # [max_little_steps + 1]
    time_prefill: float = 0.0
    time_little: float = 0.0  # little model's steps and its cache cropping
    time_large: float = 0.0  # large model's pass, the policy and its cache cropping
    time_total: float = 0.0

    def __post_init__(self) -> None:
        self.proposed_hist = self.proposed_hist or [0] * (self.max_little_steps + 1)
        self.kept_hist = self.kept_hist or [0] * (self.max_little_steps + 1)

    def record(self, allowed: int, proposed: int, kept: int) -> None:
        """Count one iteration: `allowed` little steps, `proposed` drafted, `kept` kept."""
        self.iterations += 1
        self.little_proposed += proposed
        self.little_kept += kept
        self.rollbacks += int(kept < proposed)
        self.short_proposals += int(proposed < allowed)
        self.proposed_hist[proposed] += 1
        self.kept_hist[kept] += 1

    def merge(self, other: "BildStats") -> "BildStats":
        """Sum of two runs' counts (same max_little_steps)."""
        if other.max_little_steps != self.max_little_steps:
            raise ValueError("cannot merge statistics of different max_little_steps")
        out = BildStats(self.max_little_steps)
        for name, value in asdict(self).items():
            if name != "max_little_steps":
                theirs = getattr(other, name)
                setattr(out, name, [a + b for a, b in zip(value, theirs)] if isinstance(value, list)
                        else value + theirs)
        return out

    # ---- derived rates -------------------------------------------------------------
    @property
    def target_passes(self) -> int:
        return self.iterations

    def tokens_per_pass(self) -> float:
        """Mean emitted tokens per large-model pass (includes the large model's token)."""
        return self.new_tokens / self.iterations if self.iterations else float("nan")

    def rollback_rate(self) -> float:
        """Fraction of large-model passes that rolled back a little token."""
        return self.rollbacks / self.iterations if self.iterations else float("nan")

    def keep_rate(self) -> float:
        """Little tokens kept / little tokens proposed (the analogue of alpha)."""
        return self.little_kept / self.little_proposed if self.little_proposed else float("nan")

    def tokens_per_second(self) -> float:
        return self.new_tokens / self.time_total if self.time_total else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(tokens_per_pass=self.tokens_per_pass(), rollback_rate=self.rollback_rate(),
                 keep_rate=self.keep_rate(), tokens_per_second=self.tokens_per_second())
        return d


@dataclass
class BildResult:
    tokens: list[int]  # generated tokens, prompt excluded
    from_little: list[bool]  # [len(tokens)] True where the little model's token was kept
    stats: BildStats


def accepts_min_confidence(drafter: Drafter) -> bool:
    """Whether drafter.propose takes the optional `min_confidence` keyword (fallback)."""
    return "min_confidence" in inspect.signature(drafter.propose).parameters


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


def bild_decode(target: TargetScorer, drafter: Drafter, prompt: Sequence[int], max_new_tokens: int,
                policy: BildPolicy, sampling: SamplingConfig, generator: torch.Generator | None,
                eos_id: int | None = None) -> BildResult:
    """Generate up to max_new_tokens after `prompt` with BiLD (stops after eos_id if given).

    The little model's tokens are drawn with `sampling` from its adjusted distribution (its
    argmax when greedy), the large model's token likewise from p_L.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if policy.fallback > 0 and not accepts_min_confidence(drafter):
        raise ValueError(f"{type(drafter).__name__}.propose takes no min_confidence keyword, so it "
                         "cannot fall back on confidence; use fallback 0 (hand over every "
                         "max_little_steps tokens)")
    device = target.session.device
    stats = BildStats(policy.max_little_steps)
    out: list[int] = []
    from_little: list[bool] = []
    t_start = time.perf_counter()
    target.start(prompt)
    drafter.start(prompt)
    stats.time_prefill = time.perf_counter() - t_start
    while len(out) < max_new_tokens:
        t0 = time.perf_counter()
        room = min(policy.max_little_steps, max_new_tokens - len(out) - 1)  # never past the budget
        if room == 0:
            draft = torch.empty(0, dtype=torch.long)
        elif policy.fallback > 0:
            draft = drafter.propose(room, sampling, generator, min_confidence=policy.fallback).tokens
        else:
            draft = drafter.propose(room, sampling, generator).tokens
        t1 = time.perf_counter()
        logits = target.score(draft.tolist())  # [k + 1, vocab]
        draft = draft.to(logits.device)
        m = first_rollback(logits, draft, policy.rollback, policy.keep_argmax)
        new = draft[:m].tolist() + [large_token(logits[m], sampling, generator)]
        target.commit(m, new)
        t2 = time.perf_counter()
        drafter.commit(m, new)
        stats.time_little += (t1 - t0) + (time.perf_counter() - t2)
        stats.time_large += t2 - t1
        stats.record(room, len(draft), m)
        out.extend(new)
        from_little.extend([True] * m + [False])
        if eos_id is not None and eos_id in new:
            cut = out.index(eos_id) + 1
            del out[cut:], from_little[cut:]
            break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    stats.time_total = time.perf_counter() - t_start
    stats.new_tokens = len(out)
    return BildResult(out, from_little, stats)
