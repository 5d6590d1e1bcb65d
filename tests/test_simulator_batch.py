"""The batch-aware model (specdec.simulator.batch) against Monte Carlo and by hand.

- Throughput of B sequences decoded in lockstep, each accepting drafts with per-position
  probabilities alpha_i, equals B * E(gamma) / iteration time within 5 standard errors
  (200,000 sequence-iterations, fixed seed).
- gamma = 0 is plain batched decoding (speedup 1); the best gamma falls to 0 where t(B, k)
  grows fast with k (a compute-bound batch), and the ranges cover every batch size once.
- Interpolation between measured batch sizes, and one-line refusals of bad tables.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.simulator.batch import batch_plan, gamma_ranges, interpolate_batches
from specdec.simulator.counts import conditional_from_cumulative, wilson_interval
from specdec.simulator.montecarlo import simulate_per_position

ALPHAS = [0.8, 0.7, 0.6, 0.5]
SIZES = [1, 4, 16]
# t(B, k) in seconds, k = 1..5: flat at B = 1 (memory-bound), steep at B = 16 (compute-bound)
T = np.array([[0.010, 0.0101, 0.0102, 0.0103, 0.0104],
              [0.011, 0.0125, 0.014, 0.0155, 0.017],
              [0.016, 0.030, 0.045, 0.060, 0.075]])


@pytest.mark.parametrize("b_index, gamma", [(0, 3), (1, 2), (2, 1)])
def test_throughput_matches_monte_carlo(b_index, gamma) -> None:
    b = SIZES[b_index]
    plan = batch_plan(ALPHAS, SIZES, T, c=0.05)
    rng = np.random.default_rng(b_index)
    iterations = 200_000 // b
    accepted = simulate_per_position(ALPHAS, gamma, iterations * b, rng).reshape(iterations, b)
    tokens_per_iteration = (accepted + 1).sum(axis=1)  # the batch's tokens each iteration
    seconds = plan.iteration_seconds[b_index, gamma]
    throughput = tokens_per_iteration.mean() / seconds
    se = tokens_per_iteration.std(ddof=1) / np.sqrt(iterations) / seconds
    assert abs(throughput - plan.throughput[b_index, gamma]) < 5 * se
    assert plan.latency[b_index, gamma] == pytest.approx(b / plan.throughput[b_index, gamma])
    assert plan.speedup[b_index, gamma] == pytest.approx(plan.throughput[b_index, gamma] / (b / T[b_index, 0]))


def test_plain_decoding_and_best_gamma_by_batch() -> None:
    plan = batch_plan(ALPHAS, SIZES, T, c=0.0)
    np.testing.assert_allclose(plan.speedup[:, 0], 1.0)
    assert plan.best_gamma().tolist()[0] == 4 and plan.best_gamma().tolist()[-1] == 0
    assert plan.best_gamma(tolerance=0.5).tolist()[0] < 4  # near-ties go to the shorter draft
    e = 1 + 0.8 + 0.8 * 0.7
    assert plan.speedup[1, 2] == pytest.approx(e * 0.011 / 0.014)
    ranges = gamma_ranges(ALPHAS, SIZES, T)
    assert ranges[0][0] == 1 and ranges[-1][1] == 16 and ranges[-1][2] == 0
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, no overlap
    assert [g for _, _, g in ranges] == sorted((g for _, _, g in ranges), reverse=True)


def test_interpolation_and_refusals() -> None:
    mid = interpolate_batches(SIZES, T, [2.5, 10])
    np.testing.assert_allclose(mid[0], T[0] + (T[1] - T[0]) * 0.5)
    np.testing.assert_allclose(mid[1], T[1] + (T[2] - T[1]) * 0.5)
    with pytest.raises(ValueError, match="outside"):
        interpolate_batches(SIZES, T, [32])
    with pytest.raises(ValueError, match="increasing"):
        batch_plan(ALPHAS, [4, 1, 16], T)
    with pytest.raises(ValueError, match="positive"):
        batch_plan(ALPHAS, SIZES, -T)
    with pytest.raises(ValueError, match="one row per batch size"):
        batch_plan(ALPHAS, [1, 4], T)


def test_counts_to_conditional_acceptance() -> None:
    accepted, reached = conditional_from_cumulative(100, [80, 56, 30])
    assert accepted.tolist() == [80, 56, 30] and reached.tolist() == [100, 80, 56]
    with pytest.raises(ValueError, match="position 1"):
        conditional_from_cumulative(100, [50, 60])
    lo, hi = wilson_interval(np.array([80, 0]), np.array([100, 0]))
    assert 0.70 < lo[0] < 0.8 < hi[0] < 0.88 and (lo[1], hi[1]) == (0.0, 1.0)
    # coverage: the Wilson interval holds the true proportion in about 95% of binomial draws
    rng = np.random.default_rng(0)
    k = rng.binomial(200, 0.3, size=4000)
    lo, hi = wilson_interval(k, np.full(4000, 200))
    assert 0.93 < np.mean((lo <= 0.3) & (0.3 <= hi)) < 0.97


def test_batched_pass_timing_on_a_tiny_model() -> None:
    from specdec.reference.estimate.batch_timing import time_batched_passes
    from tests.tiny_models import tiny_llama

    timing = time_batched_passes(tiny_llama(vocab_size=16, seed=0), list(range(16)), [1, 3], context_tokens=8,
                                 max_k=4, repeats=2, warmup=1)
    assert timing.batch_sizes == [1, 3] and len(timing.seconds) == 2 and all(len(r) == 4 for r in timing.seconds)
    assert all(s > 0 for row in timing.seconds for s in row)
    with pytest.raises(ValueError, match="batch sizes"):
        time_batched_passes(tiny_llama(vocab_size=16, seed=0), list(range(16)), [0], context_tokens=8)


def test_a_draft_models_step_is_timed_as_it_drafts(monkeypatch) -> None:
    # draft_step: each timed pass feeds every slot k tokens and runs the output layer on the last one
    # alone, then picks and appends every slot's token through the very function NeuralSlots drafts with
    from specdec.reference.drafters import neural
    from specdec.reference.estimate.batch_timing import time_batched_passes
    from tests.tiny_models import tiny_llama

    draft, rows, picks = tiny_llama(vocab_size=16, seed=0), [], []
    real_draw = neural.draw

    def recording(scorer, slots, logits, sampling, generators):
        before = [len(scorer.tokens[s]) for s in slots]
        q, x = real_draw(scorer, slots, logits, sampling, generators)
        picks.append((list(slots), tuple(logits.shape), sampling.greedy,
                      [len(scorer.tokens[s]) - n for s, n in zip(slots, before)]))
        return q, x

    monkeypatch.setattr(neural, "draw", recording)
    hook = draft.get_output_embeddings().register_forward_pre_hook(lambda module, args: rows.append(args[0].shape[0]))
    try:
        timing = time_batched_passes(draft, list(range(16)), [3], context_tokens=8, max_k=2, repeats=2, warmup=1,
                                     draft_step=True)
    finally:
        hook.remove()
    assert len(timing.seconds[0]) == 2 and all(s > 0 for s in timing.seconds[0])
    assert rows[-6:] == [3] * 6  # (warm-up + 2 repeats) x k = 1, 2: one row a slot each time
    assert picks == [([0, 1, 2], (3, 16), True, [1, 1, 1])] * 6  # every slot's greedy pick, appended


@pytest.mark.parametrize("value", ["4,2", "0,1", "1,x", "1,1", "1,512"])
def test_estimate_refuses_bad_batch_sizes_before_loading(capsys, value) -> None:
    from tests.cli_helpers import run_main

    code, out, err = run_main(capsys, ["estimate", "--drafter", "none", "--batch-sizes", value])
    assert code == 2 and "--batch-sizes" in err and len(err.strip().splitlines()) == 1
