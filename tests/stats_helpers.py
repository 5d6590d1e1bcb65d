"""A chi-square goodness-of-fit helper shared by the distribution tests."""
from __future__ import annotations

import numpy as np
from scipy import stats


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> float:
    """Pearson chi-square test of observed counts against probabilities.

    Cells whose expected count is below min_expected are pooled into one cell (the usual
    validity condition); returns the p-value.
    """
    counts = np.asarray(counts, dtype=float).ravel()
    probs = np.asarray(probs, dtype=float).ravel()
    probs = probs / probs.sum()
    expected = probs * counts.sum()
    small = expected < min_expected
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    if np.any(obs[~keep] > 0):
        return 0.0  # a sample fell where the target puts no mass at all
    return float(stats.chisquare(obs[keep], exp[keep]).pvalue)
