"""The joint law of the draft's confidence and acceptance (issue 52), from the estimator's
teacher-forced positions: the draft's confidence at a position is the top probability of its
unadjusted distribution there (before temperature, top-k, top-p: what the decoder's confidence
policy reads; renormalised over the top k with `specdec estimate --confidence-top-k k`, what
llama.cpp's --spec-draft-p-min reads at k = 10), its acceptance beta = sum_x min(p, q) (at T = 0
the argmax agreement). Counts are stored, rates derived: per confidence bin the positions, the
sum of beta and of beta^2, from which P(bin) and E(beta | bin) with a normal interval follow.

The pooled law (`ConfidenceCounts`, one row) counts every position alike. The per-position law
(`PositionCounts`) counts draft position i of a block started at every t with the weight of its
first i - 1 drafts being accepted (the product of the replay's acceptance along the sequence,
`PositionScores.accept`: 0/1 at T = 0, min(1, q/p) at the sampled token at T > 0): position i
conditioned on the accepted prefix, which teacher forcing sees exactly, the accepted prefix being
the sequence (docs/theory.md, "Dynamic draft length"). Past a rejection the draft's confidence law
(`past_rejection_counts`) comes from the draft scored right after its own rejected tokens
(`estimate.past_rejection`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

# finer near 1, where drafts that are accepted live
EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)


@dataclass(frozen=True)
class ConfidenceCounts:
    edges: tuple[float, ...]
    positions: tuple[int, ...]  # per bin
    accepted: tuple[float, ...]  # sum of beta per bin
    accepted_sq: tuple[float, ...]  # sum of beta^2 per bin

    @classmethod
    def of(cls, confidence: np.ndarray, beta: np.ndarray, edges: Sequence[float] = EDGES) -> "ConfidenceCounts":
        """Counts of the positions (confidence [n] in [0, 1], beta [n]) per bin [e_b, e_b+1); 1 in the last."""
        e = np.asarray(edges, dtype=np.float64)
        b = _bins(e, confidence)
        beta = np.asarray(beta, dtype=np.float64)
        return cls(tuple(float(x) for x in e), tuple(int(x) for x in np.bincount(b, minlength=e.size - 1)),
                   tuple(float(x) for x in np.bincount(b, weights=beta, minlength=e.size - 1)),
                   tuple(float(x) for x in np.bincount(b, weights=beta ** 2, minlength=e.size - 1)))

    def law(self):
        """`specdec.simulator.dynamic.ConfidenceLaw` (one row; an empty bin: weight 0, acceptance 0)."""
        from specdec.simulator.dynamic import ConfidenceLaw

        return ConfidenceLaw.from_counts(self.edges, self.positions, self.accepted, min_count=0.0)

    def to_dict(self, z: float = 1.96) -> dict[str, Any]:
        """The counts, and the rates they give: P(bin), E(beta | bin) and its normal interval."""
        n = np.asarray(self.positions, dtype=np.float64)
        mean, rows = _rates(n, np.asarray(self.accepted), np.asarray(self.accepted_sq), n, z)
        return {"edges": list(self.edges), "positions": list(self.positions), "accepted": list(self.accepted),
                "accepted_sq": list(self.accepted_sq), "weight": (n / max(n.sum(), 1.0)).tolist(),
                "accept": mean, "accept_ci": rows,
                "confidence": "the top probability of the draft's unadjusted distribution at the position"}


@dataclass(frozen=True)
class PositionCounts:
    """Counts per (draft position i = 1..K, confidence bin) on track: each block start t adds
    position i with weight u = P(drafts 1..i-1 of the block at t accepted | the sequence)."""

    edges: tuple[float, ...]
    positions: np.ndarray  # [K, M] sum of u
    positions_sq: np.ndarray  # [K, M] sum of u^2 (effective counts for the intervals)
    accepted: np.ndarray  # [K, M] sum of u beta
    accepted_sq: np.ndarray  # [K, M] sum of u beta^2

    def law(self, min_count: float = 20.0):
        """`ConfidenceLaw` with a row per position counting at least `min_count` (row 1 always);
        past a rejection the draft's confidence follows row 1 (`simulator.dynamic.confidence_law`
        reads the past-rejection counts beside these)."""
        from specdec.simulator.dynamic import ConfidenceLaw

        return ConfidenceLaw.from_counts(self.edges, self.positions, self.accepted, min_count)

    def to_dict(self, z: float = 1.96) -> dict[str, Any]:
        """Per position: the counts, P(bin | on track), E(beta | bin, on track) with intervals."""
        n_eff = np.divide(self.positions ** 2, self.positions_sq, out=np.zeros_like(self.positions),
                          where=self.positions_sq > 0)
        rates = [_rates(n, s, s2, k, z) for n, s, s2, k in zip(self.positions, self.accepted, self.accepted_sq, n_eff)]
        total = self.positions.sum(axis=1, keepdims=True)
        return {"positions": self.positions.tolist(), "positions_sq": self.positions_sq.tolist(),
                "accepted": self.accepted.tolist(), "accepted_sq": self.accepted_sq.tolist(),
                "weight": np.divide(self.positions, total, out=np.zeros_like(self.positions),
                                    where=total > 0).tolist(),
                "accept": [m for m, _ in rates], "accept_ci": [ci for _, ci in rates],
                "conditioned": "row i: draft position i of a block started at every position, weighted by "
                               "P(drafts 1..i-1 accepted) along the sampled sequence"}

    @classmethod
    def from_dict(cls, edges: Sequence[float], d: dict[str, Any]) -> "PositionCounts":
        return cls(tuple(float(x) for x in edges), *(np.asarray(d[k], dtype=np.float64)
                                                     for k in ("positions", "positions_sq", "accepted", "accepted_sq")))


def _bins(edges: np.ndarray, confidence: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bin index of each confidence: [e_b, e_b+1), 1 in the last."""
    b = np.searchsorted(edges, np.asarray(confidence, dtype=np.float64), side="right") - 1
    return np.clip(b, 0, edges.size - 2)


def _rates(n: np.ndarray, s: np.ndarray, s2: np.ndarray, n_eff: np.ndarray, z: float) -> tuple[list, list]:
    """Per bin: E(beta | bin) = s / n and its normal interval from n_eff positions (weighted
    counts: Kish's (sum u)^2 / sum u^2); None where a bin counts nothing."""
    mean = np.divide(s, n, out=np.full_like(n, np.nan), where=n > 0)
    var = np.divide(s2, n, out=np.zeros_like(n), where=n > 0) - np.nan_to_num(mean) ** 2
    half = z * np.sqrt(np.maximum(var, 0.0) / np.maximum(n_eff - 1, 1))
    rows = [None if k <= 0 else [float(max(0.0, m - h)), float(min(1.0, m + h))] for k, m, h in zip(n, mean, half)]
    return [None if k <= 0 else float(m) for k, m in zip(n, mean)], rows


def position_counts(scores: Sequence, n_max: int = 16, edges: Sequence[float] = EDGES) -> PositionCounts | None:
    """Per-position counts over the scored sequences whose confidence and replay acceptance
    (`accept()`, [W, n]) are known; K = min(n_max, 1 + max W) rows (None: none is known)."""
    known = [(s, s.accept()) for s in scores if getattr(s, "confidence", None) is not None]
    known = [(s, acc) for s, acc in known if acc is not None]
    if not known:
        return None
    e = np.asarray(edges, dtype=np.float64)
    m, k = e.size - 1, max(1, min(n_max, 1 + max(acc.shape[0] for _, acc in known)))
    out = np.zeros((4, k, m))  # positions, positions_sq, accepted, accepted_sq
    for s, acc in known:
        n = int(s.beta.size)
        b = _bins(e, s.confidence)
        u = np.ones(n)  # [n - i] P(drafts 1..i of the block at t accepted), t = 0..n-1-i
        for i in range(min(k, n)):
            at, beta = b[i:], np.asarray(s.beta[i:], dtype=np.float64)  # draft i + 1 of the block at t is x_(t+i)
            for row, x in enumerate((u, u ** 2, u * beta, u * beta ** 2)):
                out[row, i] += np.bincount(at, weights=x, minlength=m)
            if i >= acc.shape[0]:
                break
            u = u[:-1] * acc[i, :n - i - 1]
    return PositionCounts(tuple(float(x) for x in e), *out)


def past_rejection_counts(scores: Sequence, edges: Sequence[float] = EDGES) -> dict[str, Any] | None:
    """Per confidence bin, the summed weight (and weight^2) of the draft's confidence right after
    its own rejected tokens over the scored sequences that know it (None: none does)."""
    known = [s.past_rejection for s in scores if getattr(s, "past_rejection", None) is not None]
    if not known:
        return None
    e = np.asarray(edges, dtype=np.float64)
    confidence, weight = (np.concatenate([k[j] for k in known]) for j in (0, 1))
    b = _bins(e, confidence)
    positions = np.bincount(b, weights=weight, minlength=e.size - 1)
    return {"positions": positions.tolist(),
            "positions_sq": np.bincount(b, weights=weight ** 2, minlength=e.size - 1).tolist(),
            "branches": int(confidence.size),
            "weight": (positions / max(positions.sum(), 1e-300)).tolist() if positions.sum() > 0 else None,
            "conditioned": "the draft's confidence right after its own rejected token (the next draft position), "
                           "each token weighted by its chance of being drafted and rejected"}


def confidence_counts(scores: Sequence, edges: Sequence[float] = EDGES) -> ConfidenceCounts | None:
    """The counts over every scored position whose draft confidence is known (None: none is)."""
    known = [s for s in scores if getattr(s, "confidence", None) is not None]
    if not known:
        return None
    return ConfidenceCounts.of(np.concatenate([s.confidence for s in known]),
                               np.concatenate([s.beta for s in known]), edges)
