"""Per-position acceptance alpha_1..alpha_K, with 95% intervals, from an engine's counts.

- Per-position counts (vLLM V1, specdec): alpha_i = accepted_i / reached_i, Wilson interval.
- Aggregate counts (vLLM V0, llama.cpp): only r = accepted / drafted tokens is known. Under
  the i.i.d. model of Leviathan et al. with every draft k tokens long, E(accepted per draft)
  = sum_{i<=k} alpha^i, so r = (alpha - alpha^(k+1)) / ((1 - alpha) k), solved for alpha
  (monotone); r's Wilson interval maps to alpha's. Flagged as a model: engines that stop
  drafts early (llama.cpp's --draft-p-min) make drafts shorter than k and alpha biased low.
- Beyond the K observed positions the simulator reuses alpha_K; `extrapolated` says so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specdec.engines.metrics import EngineCounts
from specdec.simulator.counts import wilson_interval


@dataclass(frozen=True)
class Acceptance:
    alphas: list[float]  # alpha_1..alpha_K
    intervals: list[tuple[float, float]]  # 95%
    model: str  # "per-position counts" or the i.i.d. model's statement
    k_observed: int  # draft lengths the counts cover: positions measured, or the drafts' length k (i.i.d.)
    counts: dict  # what they came from

    def to_dict(self) -> dict:
        return {"alpha_per_position": self.alphas, "alpha_per_position_ci": [list(i) for i in self.intervals],
                "model": self.model, "positions_observed": self.k_observed, "counts": self.counts}


def iid_fraction(alpha: np.ndarray | float, k: int) -> np.ndarray:
    """Expected accepted fraction of k-token drafts under i.i.d. alpha: sum_{i<=k} alpha^i / k."""
    a = np.asarray(alpha, dtype=np.float64)
    return (a[..., None] ** np.arange(1, k + 1)).sum(-1) / k


def alpha_from_fraction(r: float, k: int) -> float:
    """The alpha in [0, 1] whose i.i.d. accepted fraction of k-token drafts is r (bisection)."""
    if not 0 <= r <= 1:
        raise ValueError(f"an accepted fraction must lie in [0, 1], got {r}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if iid_fraction(mid, k) < r else (lo, mid)
    return (lo + hi) / 2


def acceptance_from_counts(counts: EngineCounts, k: int | None = None) -> Acceptance:
    """alpha_i with intervals; k: the draft length for aggregate sources that do not state it."""
    if counts.per_position:
        acc, reached = np.array(counts.accepted), np.array(counts.reached)
        if reached[0] == 0:
            raise ValueError(f"{counts.source}: no draft was made (0 drafts reached position 1)")
        keep = int(np.max(np.nonzero(reached > 0)[0])) + 1
        lo, hi = wilson_interval(acc[:keep], reached[:keep])
        return Acceptance((acc[:keep] / reached[:keep]).tolist(), list(zip(lo.tolist(), hi.tolist())),
                          "per-position counts", keep,
                          {"accepted": acc[:keep].tolist(), "reached": reached[:keep].tolist(), "drafts": counts.drafts})
    k = counts.k or k
    if k is None:
        raise ValueError(f"{counts.source} does not state the draft length: give it (--draft-length K)")
    if not counts.draft_tokens:
        raise ValueError(f"{counts.source}: no drafted tokens counted")
    if counts.accepted_tokens is None or counts.accepted_tokens > counts.draft_tokens:
        raise ValueError(f"{counts.source}: accepted tokens missing or above drafted tokens")
    r = counts.accepted_tokens / counts.draft_tokens
    lo, hi = wilson_interval(counts.accepted_tokens, counts.draft_tokens)
    alpha = alpha_from_fraction(r, k)
    return Acceptance([alpha], [(alpha_from_fraction(float(lo), k), alpha_from_fraction(float(hi), k))],
                      f"i.i.d. alpha from {counts.accepted_tokens}/{counts.draft_tokens} accepted draft tokens, every "
                      f"draft assumed {k} tokens long (Leviathan et al.'s model; interval: Wilson on the tokens, which "
                      "are not independent: indicative)", k,
                      {"accepted_tokens": counts.accepted_tokens, "draft_tokens": counts.draft_tokens, "k": k})
