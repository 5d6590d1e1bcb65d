"""The ragged batch model (specdec.simulator.ragged) against Monte Carlo and the lockstep plan.

- Throughput: the closed form within 5 standard errors of a Monte Carlo of 100,000 passes in
  which every row draws its own (proposed, accepted) pair (fixed seed), for a drafter whose
  proposals vary in length (the pass is padded to the longest row) and one that always drafts
  gamma; the latency law's p50 and p99 equal the Monte Carlo's token-weighted quantiles
  (a discrete law: equal, or adjacent atoms where the sample quantile sits on a boundary).
- With a fixed proposal length the model is the lockstep plan of simulator/batch.py.
- The padding cost: as B grows, a pass is ever more often as wide as the longest proposal.
- Packed rows (llama.cpp's one batch of every slot's tokens): the pass priced at the rows'
  summed drafts agrees with a Monte Carlo of packed passes (5 standard errors), equals the
  padded model when every row drafts the same length, and costs less when they differ.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.errors import SpecdecError
from specdec.simulator.batch import batch_plan
from specdec.simulator.ragged import (check_joint, crossover, crossover_range, joint_from_alphas, predict_ragged,
                                      simulate_ragged, weighted_quantile)

T16 = np.array([0.016, 0.030, 0.045, 0.060, 0.075])  # t(16, k), k = 1..5: a compute-bound batch
# a prompt-lookup-like drafter: often no match (K = 0), else up to 4 drafts
VARIABLE = np.array([[30, 0, 0, 0, 0],
                     [4, 6, 0, 0, 0],
                     [3, 2, 5, 0, 0],
                     [2, 1, 2, 5, 0],
                     [5, 3, 2, 4, 26]], dtype=float)


@pytest.mark.parametrize("joint", [VARIABLE, joint_from_alphas([0.8, 0.6, 0.5, 0.4], 4)], ids=["variable", "fixed"])
@pytest.mark.parametrize("batch", [1, 4, 16])
def test_matches_monte_carlo(joint, batch: int) -> None:
    t = T16 * (0.5 + batch / 32)
    pred = predict_ragged(joint, batch, t, overhead=0.001, base_overhead=0.0005)
    passes = 100_000 // batch
    rng = np.random.default_rng(batch)
    throughput, latency, tokens = simulate_ragged(joint, batch, t, 0.001, passes, rng)
    # standard error of a ratio estimator sum(tokens) / sum(seconds) over passes
    flat = rng.choice(joint.size, size=(passes, batch), p=check_joint(joint).reshape(-1))
    k, n = np.divmod(flat, joint.shape[1])
    x, y = (n + 1).sum(axis=1), t[k.max(axis=1)] + batch * 0.001
    se = np.std(x - throughput * y, ddof=1) / np.sqrt(passes) / y.mean()
    assert abs(throughput - pred.throughput) < 5 * se
    for q in (0.5, 0.99):
        sample = weighted_quantile(latency, tokens, q)
        atoms = np.unique(pred.latency_values)
        i, j = np.searchsorted(atoms, [pred.latency_quantile(q) - 1e-12, sample - 1e-12])
        assert abs(int(i) - int(j)) <= 1, (q, sample, pred.latency_quantile(q))


def test_fixed_proposals_are_the_lockstep_plan() -> None:
    alphas, gamma, c = [0.8, 0.6, 0.5, 0.4], 3, 0.05
    sizes, table = [1, 16], np.stack([T16 * 0.6, T16])
    plan = batch_plan(alphas, sizes, table, c=c, max_gamma=4)
    for row, b in enumerate(sizes):
        pred = predict_ragged(joint_from_alphas(alphas, gamma), b, table[row], overhead=gamma * c * table[row, 0] / b)
        assert pred.throughput == pytest.approx(plan.throughput[row, gamma])
        assert pred.speedup == pytest.approx(plan.speedup[row, gamma])


def test_padding_to_the_longest_row_costs_more_as_the_batch_grows() -> None:
    flat = np.full(5, 0.02)  # a pass that costs the same whatever its width
    t = np.array([0.01, 0.02, 0.03, 0.04, 0.05])
    widths = [predict_ragged(VARIABLE, b, t, 0.0).iteration_seconds for b in (1, 2, 8, 32)]
    assert widths == sorted(widths) and widths[-1] == pytest.approx(0.05, rel=1e-3)
    assert predict_ragged(VARIABLE, 8, flat, 0.0).iteration_seconds == pytest.approx(0.02)
    assert predict_ragged(np.diag([1.0, 0, 0]), 4, t, 0.0).speedup == pytest.approx(1.0)  # never drafts: baseline


@pytest.mark.parametrize("batch", [1, 2, 8])
def test_packed_rows_match_monte_carlo(batch: int) -> None:
    t = T16 * (0.5 + batch / 32)
    pred = predict_ragged(VARIABLE, batch, t, overhead=0.001, packed=True)
    passes = 100_000 // batch
    rng = np.random.default_rng(batch)
    flat = rng.choice(VARIABLE.size, size=(passes, batch), p=check_joint(VARIABLE).reshape(-1))
    k, n = np.divmod(flat, VARIABLE.shape[1])
    x = (n + 1).sum(axis=1)
    y = np.interp(1 + k.sum(axis=1) / batch, np.arange(1, t.size + 1), t) + batch * 0.001
    throughput = x.sum() / y.sum()
    se = np.std(x - throughput * y, ddof=1) / np.sqrt(passes) / y.mean()
    assert abs(throughput - pred.throughput) < 5 * se


def test_packed_equals_padded_for_equal_rows_and_is_cheaper_otherwise() -> None:
    fixed = joint_from_alphas([0.8, 0.6, 0.5, 0.4], 4)
    for b in (1, 4):
        assert predict_ragged(fixed, b, T16, 0.0, packed=True).speedup == pytest.approx(
            predict_ragged(fixed, b, T16, 0.0).speedup)
    assert predict_ragged(VARIABLE, 1, T16, 0.0, packed=True).speedup == pytest.approx(
        predict_ragged(VARIABLE, 1, T16, 0.0).speedup)
    assert (predict_ragged(VARIABLE, 8, T16, 0.0, packed=True).iteration_seconds
            < predict_ragged(VARIABLE, 8, T16, 0.0).iteration_seconds)


def test_refusals() -> None:
    with pytest.raises(SpecdecError, match="square"):
        check_joint(np.ones((2, 3)))
    with pytest.raises(SpecdecError, match="more drafts"):
        check_joint([[1, 1], [0, 1]])
    with pytest.raises(SpecdecError, match="t\\(B, k\\)"):
        predict_ragged(VARIABLE, 4, [0.01, 0.02], 0.0)
    with pytest.raises(SpecdecError, match="overheads"):
        predict_ragged(VARIABLE, 4, T16, float("nan"))
    with pytest.raises(SpecdecError, match="quantile"):
        weighted_quantile([1.0], [1.0], 1.0)


@pytest.mark.parametrize("packed", [False, True])
def test_a_batched_drafts_seconds_add_to_the_pass_once(packed) -> None:
    """d(B) seconds a pass for all the rows is B rows' overhead of d(B) / B each: the same
    iteration, throughput and latency law; and it slows the batch by exactly d(B) a pass."""
    t, d = T16, 0.012
    for b in (1, 4, 8):
        drafted = predict_ragged(VARIABLE, b, t, 0.001, 0.0005, packed=packed, draft_seconds=d)
        spread = predict_ragged(VARIABLE, b, t, 0.001 + d / b, 0.0005, packed=packed)
        assert drafted.iteration_seconds == pytest.approx(spread.iteration_seconds)
        assert drafted.speedup == pytest.approx(spread.speedup)
        assert drafted.latency_quantile(0.5) == pytest.approx(spread.latency_quantile(0.5))
        bare = predict_ragged(VARIABLE, b, t, 0.001, 0.0005, packed=packed)
        assert drafted.iteration_seconds - bare.iteration_seconds == pytest.approx(d)
    with pytest.raises(SpecdecError, match="draft's seconds"):
        predict_ragged(VARIABLE, 4, t, 0.0, draft_seconds=-1.0)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("batch", [1, 4, 16])
def test_the_drafts_first_forward_feeds_what_the_verdicts_committed(packed, batch) -> None:
    """d(B) against a Monte Carlo of 40,000 passes: every row draws its (proposed, accepted) pair
    for this pass and, independently, for the pass before; the draft runs as many forwards as this
    pass's longest proposal (none when no row drafts); a drafting row whose previous verdict
    accepted its whole draft feeds two tokens to the first, any other one; padded, that forward is
    as wide as the widest fed row; packed, the fed rows' mean width."""
    from specdec.simulator.ragged import draft_pass_seconds, longest_proposal

    t_d = np.array([0.004, 0.011])
    rng = np.random.default_rng(0)
    p = VARIABLE / VARIABLE.sum()
    k, _ = np.divmod(rng.choice(p.size, size=(40_000, batch), p=p.ravel()), p.shape[1])
    k_before, n_before = np.divmod(rng.choice(p.size, size=(40_000, batch), p=p.ravel()), p.shape[1])
    two = (n_before == k_before) & (k_before > 0)
    fed = k > 0
    if packed:
        width = 1 + np.divide((two & fed).sum(axis=1), fed.sum(axis=1), out=np.zeros(40_000), where=fed.any(axis=1))
        first = np.interp(width, (1, 2), t_d)
    else:
        first = np.where((two & fed).any(axis=1), t_d[1], t_d[0])
    longest = k.max(axis=1)
    simulated = np.where(longest > 0, first + (longest - 1) * t_d[0], 0.0)
    got = draft_pass_seconds(VARIABLE, batch, t_d, packed)
    assert got == pytest.approx(simulated.mean(), abs=5 * simulated.std() / np.sqrt(simulated.size) + 1e-12)
    assert longest_proposal(VARIABLE, batch) == pytest.approx(longest.mean(), abs=5 * longest.std() / 200 + 1e-12)
    # rows that always draft 2 and never accept both: two one-token forwards a pass
    never = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    assert draft_pass_seconds(never, batch, t_d, packed) == pytest.approx(2 * t_d[0])
    with pytest.raises(SpecdecError, match="k = 1, 2"):
        draft_pass_seconds(VARIABLE, batch, t_d[:1])


def test_the_crossover_and_where_its_intervals_let_it_lie() -> None:
    sizes = [1, 2, 4, 8]
    assert crossover(sizes, [1.3, 1.1, 0.98, 1.01]) is None  # pays again at B = 8: no crossover
    assert crossover(sizes, [1.3, 1.1, 1.003, 0.95]) == 8
    assert crossover(sizes, [0.9, 0.8, 0.7, 0.6]) == 1
    # the llama.cpp Q4_1 streams run 1's synthetic row: B = 4 sits on 1, so the data allow 4 or 8
    synthetic = [(1.218, 1.297), (1.065, 1.141), (0.973, 1.048), (0.895, 0.959)]
    assert crossover_range(sizes, synthetic) == (4, 8)
    # an interval holding 1 at the largest B: the crossover may lie past it
    assert crossover_range(sizes, [(1.2, 1.3), (1.0, 1.2), (0.89, 1.12), (0.86, 1.08)]) == (4, None)
    # every interval clear of 1: the measurement decides it
    assert crossover_range(sizes, [(1.2, 1.3), (1.05, 1.1), (0.9, 0.95), (0.8, 0.9)]) == (4, 4)
