"""The joint law of the draft's confidence and acceptance (issue 52), from the estimator's
teacher-forced positions: the draft's confidence at a position is the top probability of its
unadjusted distribution there (before temperature, top-k, top-p: what the decoder's confidence
policy and llama.cpp's --spec-draft-p-min read), its acceptance beta = sum_x min(p, q) (at T = 0
the argmax agreement). Counts are stored, rates derived: per confidence bin the positions, the
sum of beta and of beta^2, from which P(bin) and E(beta | bin) with a normal interval follow.
One law for every draft position (`specdec.simulator.dynamic.ConfidenceLaw` with one row):
teacher forcing sees each position from the true prefix, which is what a draft position sees
when every token before it was accepted."""
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
        b = np.clip(np.searchsorted(e, np.asarray(confidence, dtype=np.float64), side="right") - 1, 0, e.size - 2)
        beta = np.asarray(beta, dtype=np.float64)
        return cls(tuple(float(x) for x in e), tuple(int(x) for x in np.bincount(b, minlength=e.size - 1)),
                   tuple(float(x) for x in np.bincount(b, weights=beta, minlength=e.size - 1)),
                   tuple(float(x) for x in np.bincount(b, weights=beta ** 2, minlength=e.size - 1)))

    def law(self):
        """`specdec.simulator.dynamic.ConfidenceLaw` (one row; an empty bin: weight 0, acceptance 0)."""
        from specdec.simulator.dynamic import ConfidenceLaw

        n = np.asarray(self.positions, dtype=np.float64)
        accept = np.divide(self.accepted, n, out=np.zeros_like(n), where=n > 0)
        return ConfidenceLaw(self.edges, (n / n.sum())[None, :], np.clip(accept, 0.0, 1.0)[None, :])

    def to_dict(self, z: float = 1.96) -> dict[str, Any]:
        """The counts, and the rates they give: P(bin), E(beta | bin) and its normal interval."""
        n = np.asarray(self.positions, dtype=np.float64)
        s, s2 = np.asarray(self.accepted), np.asarray(self.accepted_sq)
        mean = np.divide(s, n, out=np.full_like(n, np.nan), where=n > 0)
        var = np.divide(s2, n, out=np.zeros_like(n), where=n > 0) - np.nan_to_num(mean) ** 2
        half = z * np.sqrt(np.maximum(var, 0.0) / np.maximum(n - 1, 1))
        rows = [None if k == 0 else [float(max(0.0, m - h)), float(min(1.0, m + h))]
                for k, m, h in zip(self.positions, mean, half)]
        return {"edges": list(self.edges), "positions": list(self.positions), "accepted": list(self.accepted),
                "accepted_sq": list(self.accepted_sq), "weight": (n / max(n.sum(), 1.0)).tolist(),
                "accept": [None if k == 0 else float(m) for k, m in zip(self.positions, mean)], "accept_ci": rows,
                "confidence": "the top probability of the draft's unadjusted distribution at the position"}


def confidence_counts(scores: Sequence, edges: Sequence[float] = EDGES) -> ConfidenceCounts | None:
    """The counts over every scored position whose draft confidence is known (None: none is)."""
    known = [s for s in scores if getattr(s, "confidence", None) is not None]
    if not known:
        return None
    return ConfidenceCounts.of(np.concatenate([s.confidence for s in known]),
                               np.concatenate([s.beta for s in known]), edges)
