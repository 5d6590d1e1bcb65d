"""Estimate alpha (Corollary 3.6) on held-out prompts, with a bootstrap interval over prompts.

Names follow Leviathan et al.: `p` target, `q` draft, beta = sum_x min(p, q) for one prefix,
alpha = E(beta), `l` the lenience of App. A.5. What it estimates and what it does not (later
draft positions at T > 0): docs/estimator.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.reference.estimate.samples import TargetSamples
from specdec.reference.measure.bootstrap import bootstrap_ratio_ci
from specdec.reference.estimate.teacher_forced import PositionScores, score_positions

BETA_QUANTILES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
HISTOGRAM_BINS = 20  # beta histogram: 20 bins of width 0.05 on [0, 1]
DEFAULT_LENIENCE = (1.0, 0.5, 0.3, 0.1)  # the l values of the paper's Table 5


def beta_summary(beta: np.ndarray) -> tuple[dict[str, float], dict[str, list]]:
    """Quantiles {"q05": ...} and a histogram {"edges": [21], "counts": [20]} of beta values."""
    values = np.quantile(beta, BETA_QUANTILES)
    quantiles = {f"q{int(round(q * 100)):02d}": float(v) for q, v in zip(BETA_QUANTILES, values)}
    counts, edges = np.histogram(np.clip(beta, 0.0, 1.0), bins=HISTOGRAM_BINS, range=(0.0, 1.0))
    return quantiles, {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


@dataclass
class AlphaEstimate:
    """The estimator's result for one (target, drafter, sampling).

    alpha: mean beta over all continuation positions; alpha_ci its bootstrap interval.
    alpha_lenience: alpha under each lenience l (sum min(p/l, q)); l = 1 equals alpha.
    alpha_lenient_argmax: temperature 0 only, App. A.5's argmax variant (accept the draft's
        token x when p_raw(x) >= l max p_raw, p_raw the unadjusted target softmax).
    proposal_rate: fraction of positions with a proposal (1 except for prompt lookup);
        alpha_when_proposed: mean beta over those positions.
    alpha_per_position: blockwise drafts only (heads, feature draft), alpha_i = P(draft i
        accepted | drafts < i were) = E_t[prod_(j<i) r_j,t beta_i,t] / E_t[prod_(j<i) r_j,t]
        over block starts t, r_j,t the acceptance of draft j along the target's sequence
        (`PositionScores.accept`: exact at T = 0, unbiased at T > 0; docs/estimator.md,
        "Replay"), with bootstrap intervals over prompts.
    scores: the per-position data (not serialised).
    """

    alpha: float
    alpha_ci: tuple[float, float]
    confidence: float
    n_prompts: int
    n_positions: int
    lenience: tuple[float, ...]
    alpha_lenience: tuple[float, ...]
    alpha_lenient_argmax: tuple[float, ...] | None
    proposal_rate: float
    alpha_when_proposed: float | None
    alpha_when_proposed_ci: tuple[float, float] | None
    beta_quantiles: dict[str, float]
    beta_histogram: dict[str, list]
    beta_mean_per_prompt: list[float]
    estimates: str
    max_gamma: int = 0  # block length of the temperature-0 replay data in `scores`
    alpha_per_position: tuple[float, ...] | None = None  # blockwise heads: alpha_1..alpha_H (conditional)
    alpha_per_position_ci: tuple[tuple[float, float], ...] | None = None
    confidence_law: dict[str, Any] | None = None  # chain drafters: `estimate.confidence` (pooled, per_position)
    scores: list[PositionScores] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha, "alpha_ci": list(self.alpha_ci), "confidence": self.confidence,
            "n_prompts": self.n_prompts, "n_positions": self.n_positions,
            "lenience": list(self.lenience),
            "alpha_lenience": {f"{l:g}": a for l, a in zip(self.lenience, self.alpha_lenience)},
            "alpha_lenient_argmax": None if self.alpha_lenient_argmax is None else
            {f"{l:g}": a for l, a in zip(self.lenience, self.alpha_lenient_argmax)},
            "proposal_rate": self.proposal_rate, "alpha_when_proposed": self.alpha_when_proposed,
            "alpha_when_proposed_ci": (None if self.alpha_when_proposed_ci is None
                                       else list(self.alpha_when_proposed_ci)),
            "beta_quantiles": self.beta_quantiles, "beta_histogram": self.beta_histogram,
            "beta_mean_per_prompt": self.beta_mean_per_prompt, "estimates": self.estimates,
            "alpha_per_position": None if self.alpha_per_position is None else list(self.alpha_per_position),
            "alpha_per_position_ci": None if self.alpha_per_position_ci is None else
            [list(ci) for ci in self.alpha_per_position_ci],
            "confidence_law": self.confidence_law,
        }


def summarize(scores: Sequence[PositionScores], lenience: Sequence[float], rng: np.random.Generator,
              n_boot: int = 2000, confidence: float = 0.95, deterministic: bool = False,
              max_gamma: int = 0) -> AlphaEstimate:
    """alpha, its bootstrap interval over prompts, beta's distribution and lenient alphas."""
    if not scores or sum(s.beta.size for s in scores) == 0:
        raise SpecdecError("no scored positions: need at least one prompt with a continuation")
    beta = np.concatenate([s.beta for s in scores])
    sums = np.array([s.beta.sum() for s in scores])
    counts = np.array([s.beta.size for s in scores], dtype=np.float64)
    alpha = float(beta.mean())
    ci = bootstrap_ratio_ci(sums, counts, rng, n_boot, confidence)
    lenient = np.concatenate([s.beta_lenient for s in scores], axis=1)  # [n_l, N]
    argmax_lenient = None
    if all(s.lenient_argmax is not None for s in scores) and len(lenience):
        argmax_lenient = tuple(float(a) for a in np.concatenate([s.lenient_argmax for s in scores], axis=1).mean(1))
    proposed = np.concatenate([s.proposed for s in scores])
    when, when_ci = None, None
    if proposed.any():
        when = float(beta[proposed].mean())
        p_sums = np.array([s.beta[s.proposed].sum() for s in scores])
        p_counts = np.array([s.proposed.sum() for s in scores], dtype=np.float64)
        keep = p_counts > 0
        when_ci = bootstrap_ratio_ci(p_sums[keep], p_counts[keep], rng, n_boot, confidence)
    quantiles, histogram = beta_summary(beta)
    what = ("mean over target-sampled positions of beta = sum_x min(p, q) with teacher-forced p and q "
            "(Corollary 3.6); at temperature 0 the argmax agreement rate")
    if deterministic:
        what += ("; deterministic drafter: beta = p(proposed token) (argmax agreement at T=0), positions "
                 "without a proposal count as rejections")
    if scores and all(s.match is not None and s.match.ndim == 2 for s in scores):
        what += ("; token tree: beta = p(the tree's first level), the chance its roots hold the emitted token, "
                 "and the replay walks the tree drafted at each draft length along the sequence")
    per_position = positional_alphas(scores, rng, n_boot, confidence)
    from specdec.reference.estimate.confidence import confidence_counts, past_rejection_counts, position_counts

    counts, rows = confidence_counts(scores), position_counts(scores)
    return AlphaEstimate(
        confidence_law=None if counts is None else {**counts.to_dict(),
                                                    "per_position": None if rows is None else rows.to_dict(),
                                                    "past_rejection": past_rejection_counts(scores)},
        alpha_per_position=None if per_position is None else tuple(a for a, _ in per_position),
        alpha_per_position_ci=None if per_position is None else tuple(ci for _, ci in per_position),
        alpha=alpha, alpha_ci=ci, confidence=confidence, n_prompts=len(scores), n_positions=int(beta.size),
        lenience=tuple(float(l) for l in lenience), alpha_lenience=tuple(float(a) for a in lenient.mean(1)),
        alpha_lenient_argmax=argmax_lenient, proposal_rate=float(proposed.mean()), alpha_when_proposed=when,
        alpha_when_proposed_ci=when_ci, beta_quantiles=quantiles, beta_histogram=histogram,
        beta_mean_per_prompt=[float(s.beta.mean()) for s in scores], estimates=what, max_gamma=max_gamma,
        scores=list(scores))


def positional_alphas(scores: Sequence[PositionScores], rng: np.random.Generator, n_boot: int, confidence: float
                      ) -> list[tuple[float, tuple[float, float]]] | None:
    """[(alpha_i, interval)] for i = 1..H from blockwise offset betas; None for other drafters."""
    if not scores or any(s.offset_beta is None for s in scores):
        return None
    out = []
    accepts = [s.accept() for s in scores]
    for i in range(min(s.offset_beta.shape[0] for s in scores)):
        sums, counts = [], []
        for s, accept in zip(scores, accepts):
            ok = np.isfinite(s.offset_beta[i])  # block starts whose draft i + 1 is inside the sequence
            before = np.prod(accept[:i, ok], axis=0)  # P(drafts 1..i accepted | the sequence); 1 for i = 0
            sums.append((before * s.offset_beta[i, ok]).sum())  # and draft i + 1, its token integrated out
            counts.append(before.sum())
        sums_a, counts_a = np.array(sums), np.array(counts)
        keep = counts_a > 0
        if not keep.any():
            break
        out.append((float(sums_a.sum() / counts_a.sum()), bootstrap_ratio_ci(sums_a[keep], counts_a[keep], rng,
                                                                             n_boot, confidence)))
    return out


def estimate_alpha(target: torch.nn.Module, drafter, samples: TargetSamples, vocab_size: int,
                   rng: np.random.Generator, lenience: Sequence[float] = DEFAULT_LENIENCE, batch_size: int = 8,
                   max_gamma: int = 16, n_boot: int = 2000, confidence: float = 0.95,
                   generator: torch.Generator | None = None, progress: bool = False) -> AlphaEstimate:
    """alpha of `drafter` against `target` on the target's own samples (see the module doc).

    Args:
        target: the target causal LM; samples: its continuations (`generate_continuations`),
            whose `sampling` is the transform applied to both p and q.
        drafter: a drafter object (neural, n-gram, prompt lookup, any protocol drafter).
        vocab_size: the target's vocabulary size (rows of its output layer).
        rng: seeded numpy Generator for the bootstrap.
        max_gamma: block length recorded for the temperature-0 replay of deterministic drafters.
        generator: torch Generator for protocol drafters that sample (their draws are unused).
    """
    lenience = tuple(float(l) for l in lenience) or (1.0,)
    for l in lenience:
        if not 0 < l <= 1:
            raise SpecdecError(f"lenience values must be in (0, 1], got {l:g}")
    scorer = drafter.teacher_forced_scorer(target, max_gamma, generator)
    scores = score_positions(target, scorer, samples, samples.sampling, vocab_size, lenience, batch_size,
                             max_gamma, progress)
    return alpha_from_scores(scores, lenience, rng, n_boot, confidence, max_gamma)


def alpha_from_scores(scores: Sequence[PositionScores], lenience: Sequence[float], rng: np.random.Generator,
                      n_boot: int = 2000, confidence: float = 0.95, max_gamma: int = 0) -> AlphaEstimate:
    """`summarize` for one drafter's scores, in prompt order (from one process or merged from
    several: the same scores give the same estimate, interval included, for the same rng)."""
    deterministic = all(s.proposes_tokens for s in scores)
    return summarize(scores, tuple(float(l) for l in lenience) or (1.0,), rng, n_boot, confidence,
                     deterministic=deterministic, max_gamma=max_gamma)
