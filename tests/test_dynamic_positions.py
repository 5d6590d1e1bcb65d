"""The position-conditioned confidence law (issue 52): the estimator's per-position counts by
hand (T = 0 and the weighted T > 0 case), old files read as the pooled law, and a Monte Carlo
of a draft chain whose confidence and acceptance come in streaks (a Markov chain along the
sequence), where the pooled law mispredicts the drafts and tokens per iteration and the
per-position law, estimated from the same sequence, predicts them."""
from __future__ import annotations

import numpy as np
import pytest

from specdec.reference.estimate.confidence import (ConfidenceCounts, PositionCounts, confidence_counts,
                                                   position_counts)
from specdec.reference.estimate.replay import accept_from_match
from specdec.simulator.dynamic import ConfidenceLaw, confidence_law, threshold_prediction

EDGES = (0.0, 0.25, 0.5, 0.75, 1.0)


class Scored:
    """What `position_counts` reads of a `PositionScores`: confidence, beta, accept() [W, n]."""

    def __init__(self, confidence, beta, accept) -> None:
        self.confidence, self.beta, self._accept = np.asarray(confidence), np.asarray(beta, dtype=float), accept

    def accept(self) -> np.ndarray:
        return self._accept


def test_per_position_counts_by_hand_at_t0() -> None:
    # bins 0..3 of four positions; accepted (argmax agreement) 1, 1, 0, 1
    conf, beta = [0.9, 0.6, 0.1, 0.8], [1.0, 1.0, 0.0, 1.0]
    match = np.array([2, 1, 0, 1])  # leading drafts from t that equal the sequence (width 2)
    rows = position_counts([Scored(conf, beta, accept_from_match(match, 2))], n_max=8, edges=EDGES)
    assert rows.positions.shape == (3, 4)  # K = 1 + W
    assert rows.positions[0].tolist() == [1, 0, 1, 2]  # every position, as the pooled law
    # position 2 of the blocks at t = 0, 1, 2 (weights 1, 1, 0): x_1 (bin 2), x_2 (bin 0), x_3 (bin 3, weight 0)
    assert rows.positions[1].tolist() == [1, 0, 1, 0] and rows.accepted[1].tolist() == [0, 0, 1, 0]
    # position 3: blocks at t = 0, 1 with weights 1 * 1, 1 * 0: x_2 only
    assert rows.positions[2].tolist() == [1, 0, 0, 0] and rows.accepted[2].tolist() == [0, 0, 0, 0]
    pooled = ConfidenceCounts.of(conf, beta, EDGES)
    assert rows.positions[0].tolist() == list(pooled.positions) and rows.accepted[0].tolist() == list(pooled.accepted)


def test_per_position_counts_are_weighted_by_the_accepted_prefix_at_t1() -> None:
    conf, beta = [0.9, 0.6, 0.3], [0.8, 0.5, 0.2]
    accept = np.array([[0.9, 0.4, 0.7], [0.5, 0.6, 0.0]])  # [W, n]: min(1, q/p) of draft i + 1 from t
    rows = position_counts([Scored(conf, beta, accept)], edges=EDGES)
    assert rows.positions[1] == pytest.approx([0, 0.4, 0.9, 0])  # x_1 weight 0.9, x_2 weight 0.4
    assert rows.accepted[1] == pytest.approx([0, 0.4 * 0.2, 0.9 * 0.5, 0])
    assert rows.positions[2] == pytest.approx([0, 0.45, 0, 0]) and rows.positions_sq[2] == pytest.approx([0, 0.2025, 0, 0])
    d = rows.to_dict()
    assert d["weight"][1] == pytest.approx([0, 0.4 / 1.3, 0.9 / 1.3, 0]) and d["accept"][2][1] == pytest.approx(0.2)
    assert PositionCounts.from_dict(EDGES, d).accepted == pytest.approx(rows.accepted)


def test_old_files_read_as_the_pooled_law_and_thin_rows_are_dropped() -> None:
    pooled = ConfidenceCounts.of([0.1, 0.4, 0.9, 0.95], [0.0, 0.5, 1.0, 1.0], EDGES).to_dict()
    old = confidence_law(pooled)  # a file from before the per-position law
    assert old.weights.shape == (1, 4) and old.off == pytest.approx(old.weights[0])
    n = np.array([[30.0, 10, 10, 50], [2, 3, 10, 10], [1, 1, 1, 1]])  # row 3 counts 4 < 20
    law = ConfidenceLaw.from_counts(EDGES, n, n * 0.5)
    assert law.weights.shape == (2, 4) and law.rows(5)[0][4] == pytest.approx(n[1] / n[1].sum())
    assert confidence_law(None) is None


def streaky_sequence(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(bin [n], accepted [n]) of a Markov chain along the sequence: after an accepted draft the
    next is likelier confident (W_AFTER[1]), after a rejected one likelier not; P(accepted | bin)
    the same in both."""
    bins, acc, prev = np.empty(n, dtype=int), np.empty(n), 0
    for t in range(n):
        bins[t] = rng.choice(4, p=W_AFTER[prev])
        acc[t] = prev = int(rng.random() < A[bins[t]])
    return bins, acc


W_AFTER = np.array([[0.55, 0.3, 0.1, 0.05], [0.05, 0.1, 0.25, 0.6]])  # bin law after a rejected / accepted draft
A = np.array([0.1, 0.4, 0.7, 0.95])  # P(accepted | bin)
CENTRES = np.array([0.125, 0.375, 0.625, 0.875])


def decode_along(bins: np.ndarray, acc: np.ndarray, off: np.ndarray, tau: float, n_max: int, keep_last: bool,
                 iterations: int, rng: np.random.Generator) -> tuple[float, float]:
    """(tokens, drafts) per iteration of the threshold rule on blocks started at uniform positions
    of the sequence: on track a draft reads the sequence's bin and acceptance; past a rejection
    its bin is drawn from `off` (the estimator's assumption: row 1, the sequence's marginal)."""
    low = CENTRES < tau
    tokens = drafts = 0
    for t in rng.integers(0, bins.size - n_max - 1, size=iterations):
        alive, n = True, 0
        while n < n_max:
            b = bins[t + n] if alive else rng.choice(4, p=off)
            if low[b] and not keep_last:
                break
            alive = alive and bool(acc[t + n])
            tokens += alive
            n += 1
            if low[b]:
                break
        tokens += 1
        drafts += n
    return tokens / iterations, drafts / iterations


@pytest.mark.parametrize("tau,n_max,keep_last", [(0.25, 6, False), (0.5, 6, False), (0.5, 5, True), (0.75, 8, False)])
def test_streaky_drafts_need_the_per_position_law(tau, n_max, keep_last) -> None:
    rng = np.random.default_rng(7)
    seqs = [streaky_sequence(6000, rng) for _ in range(4)]
    scores = []
    for bins, acc in seqs:
        match = np.array([int(np.argmin(np.append(acc[t:t + 8], 0.0))) for t in range(acc.size)])  # leading accepted
        scores.append(Scored(CENTRES[bins], acc, accept_from_match(np.minimum(match, 8), 8)))
    pooled = confidence_counts(scores, EDGES).law()
    per_position = position_counts(scores, n_max=9, edges=EDGES).law()
    assert per_position.weights.shape[0] == 9 and per_position.off == pytest.approx(pooled.weights[0])
    bins, acc = (np.concatenate(x) for x in zip(*seqs))
    tokens, drafts = decode_along(bins, acc, pooled.weights[0], tau, n_max, keep_last, 40_000, rng)
    good = threshold_prediction(per_position, [tau], 0, n_max, 0.1, None, keep_last)
    bad = threshold_prediction(pooled, [tau], 0, n_max, 0.1, None, keep_last)
    assert good.expected_tokens[0] == pytest.approx(tokens, rel=0.03)
    assert good.expected_drafts[0] == pytest.approx(drafts, rel=0.03)
    # the pooled law treats positions as independent: it misses the streaks by far more
    assert abs(bad.expected_drafts[0] / drafts - 1) > 0.15 and abs(bad.expected_tokens[0] / tokens - 1) > 0.1


def test_the_validation_estimates_as_deep_as_its_longest_rule_drafts() -> None:
    from specdec.reference.validation.config import ValidationConfig

    rules = ("confidence:tau=0.3,n_max=6", "heuristic:initial=2,n_max=5,persist=1")
    assert ValidationConfig(gammas=(1, 2), max_k=7, policies=rules).draft_top == 6
    assert ValidationConfig(gammas=(1, 3), max_k=7).draft_top == 3
