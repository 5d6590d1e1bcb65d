"""llama.cpp's equal split of a ragged batch (specdec.simulator.equal_split): the micro-batches
follow `llama_batch_allocr::split_equal(sequential=true)` on hand-worked feeds, the vectorised
pricing equals the step-by-step rule, equal feeds are the one-pass (packed) prediction exactly, the
Monte Carlo mean lies within its standard error of the exact expectation enumerated over every
feed vector, and u(r, m) is read as timed, else by the micro-batch's tokens."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from specdec.errors import SpecdecError
from specdec.simulator.equal_split import (drafting_share_seconds, equal_split_plan, mixed_ubatches,
                                          predict_equal_split, split_decodes, split_seconds, ubatch_seconds)
from specdec.simulator.ragged import joint_from_alphas, predict_ragged


def _table(rows: int, width: int) -> np.ndarray:
    """u(r, m): a fixed cost a decode plus a little a token, as a memory-bound engine has it."""
    r, m = np.meshgrid(np.arange(1, rows + 1), np.arange(1, width + 1), indexing="ij")
    return 0.020 + 0.002 * r * m


@pytest.mark.parametrize("feeds, decodes", [
    ([1, 1, 1], [(3, 1)]),  # plain decoding: one decode
    ([5, 5], [(2, 5)]),  # equal drafts: one decode
    ([1, 5], [(2, 1), (1, 4)]),  # a drafting slot beside a plain one: two
    ([5, 1, 5], [(3, 1), (1, 4), (1, 4)]),  # the run breaks at the plain slot: only consecutive slots join
    ([3, 3, 1, 3, 3], [(5, 1), (2, 2), (2, 2)]),
    ([2, 3, 1, 4], [(4, 1), (2, 1), (1, 1), (1, 3)]),
    ([4, 2, 3], [(3, 2), (1, 2), (1, 1)]),
])
def test_micro_batches_follow_llama_cpps_rule(feeds, decodes) -> None:
    assert split_decodes(feeds) == decodes
    assert sum(r * m for r, m in decodes) == sum(feeds)


def test_the_vectorised_price_is_the_rule_step_by_step() -> None:
    rng = np.random.default_rng(3)
    feeds = rng.integers(1, 7, size=(300, 6))
    u = _table(6, 6)
    seconds, decodes = split_seconds(feeds, u)
    for f, s, d in zip(feeds, seconds, decodes):
        steps = split_decodes(f)
        assert d == len(steps) and s == pytest.approx(sum(u[r - 1, m - 1] for r, m in steps))


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_equal_feeds_are_the_one_pass_prediction(batch: int) -> None:
    joint = joint_from_alphas([0.8, 0.6, 0.5], 3)  # every row proposes 3: every step one decode
    u = _table(batch, 4)
    split = predict_equal_split(joint, batch, u, 1e-4, np.random.default_rng(0), samples=500)
    packed = predict_ragged(joint, batch, u[batch - 1], 1e-4, packed=True)
    assert split.decodes == 1 and split.iteration_standard_error == pytest.approx(0, abs=1e-12)
    assert split.prediction.iteration_seconds == pytest.approx(packed.iteration_seconds)
    assert split.prediction.speedup == pytest.approx(packed.speedup)


@pytest.mark.parametrize("batch", [2, 3, 4])
def test_monte_carlo_mean_is_the_exact_expectation(batch: int) -> None:
    # a row drafts 3 tokens on half its steps, accepting per position 0.9, 0.7, 0.5, or feeds only its token
    joint = np.zeros((4, 4))
    joint[3] = 0.5 * joint_from_alphas([0.9, 0.7, 0.5], 3)[3]
    joint[0, 0] = 0.5
    pk = joint.sum(axis=1)
    u = _table(batch, 4)
    support = [k for k in range(4) if pk[k] > 0]
    exact = sum(np.prod([pk[k] for k in ks]) * split_seconds([np.array(ks) + 1], u)[0][0]
                for ks in itertools.product(support, repeat=batch))
    got = predict_equal_split(joint, batch, u, 0.0, np.random.default_rng(batch), samples=20_000)
    assert abs(got.prediction.iteration_seconds - exact) < 4 * got.iteration_standard_error
    # and it costs more than one packed pass whenever drafting and plain rows meet
    packed = predict_ragged(joint, batch, u[batch - 1], 0.0, packed=True)
    assert got.prediction.speedup < packed.speedup and 1 < got.decodes < 1 + batch


@pytest.mark.parametrize("batch, gamma, share", [(1, 3, 0.4), (3, 2, 0.5), (5, 4, 0.3), (6, 1, 0.9)])
def test_the_plans_closed_form_is_every_feed_vector_enumerated(batch: int, gamma: int, share: float) -> None:
    # each slot drafts gamma with probability s, else feeds its token: E over all 2^B feed vectors
    u = _table(batch, gamma + 1)
    exact = sum(share ** sum(d) * (1 - share) ** (batch - sum(d))
                * split_seconds([[gamma + 1 if x else 1 for x in d]], u)[0][0]
                for d in itertools.product([0, 1], repeat=batch))
    assert drafting_share_seconds(batch, gamma, share, u) == pytest.approx(exact)
    joint = np.zeros((gamma + 1, gamma + 1))
    joint[0, 0], joint[gamma, gamma] = 1 - share, share
    mc = predict_equal_split(joint, batch, u, 0.0, np.random.default_rng(1), samples=20_000)
    assert abs(mc.prediction.iteration_seconds - exact) < 4 * mc.iteration_standard_error + 1e-12


def test_micro_batches_are_priced_as_timed_else_by_their_tokens() -> None:
    # t(B, k) timed at B = 1, 2, k = 1..3 (ms): 10 + 5 (B k - 1) except t(2, 1), timed at 13
    seconds = {1: np.array([10.0, 15.0, 20.0]), 2: np.array([13.0, 25.0, 35.0])}
    u = ubatch_seconds(seconds, 4, 5)
    assert u[0, :3] == pytest.approx(seconds[1]) and u[1, :3] == pytest.approx(seconds[2])  # timed: as timed
    assert u[0, 3] == pytest.approx(25.0) and u[3, 0] == pytest.approx(25.0)  # 4 tokens, as t(2, 2)
    assert u[2, 0] == pytest.approx(20.0)  # 3 tokens, as t(1, 3)
    assert u[2, 1] == pytest.approx(35.0)  # 6 tokens, as t(2, 3)
    assert u[2, 2] == pytest.approx(35.0 + 5.0 * 3)  # 9 tokens: the last slope, (35 - 25) / (6 - 4), on
    assert u[3, 4] == pytest.approx(35.0 + 5.0 * (20 - 6))


@pytest.mark.parametrize("batch", [2, 3, 5])
def test_mixed_steps_price_every_step_of_a_server_whose_later_micro_batches_cost_less(batch: int) -> None:
    # An engine (the EPYC's llama-server at f32, in kind) whose step of feeds in {1, k} costs its plain
    # micro-batch p plus, per maximal run of r drafting slots, w(r) -- not the u(r, k - 1) its standalone
    # k - 1 token steps were timed at (1.4x w here); every slot drafting is one pass f.
    k, p, f = 5, 0.021, 0.050 + 0.001 * batch
    w = {r: 0.020 + 0.004 * r for r in range(1, batch)}

    def engine(feeds: list[int]) -> float:
        if all(x == k for x in feeds):
            return f
        runs = [len(list(g)) for x, g in itertools.groupby(feeds) if x == k]
        return p + sum(w[r] for r in runs)

    u = _table(batch, k)
    u[:batch - 1, k - 2] = [1.4 * w[r] for r in range(1, batch)]  # the standalone timings: dearer
    mixed = [engine([k] * r + [1] * (batch - r)) for r in range(batch + 1)]  # what --mixed-k times
    priced = mixed_ubatches(u, mixed, k)
    for feeds in itertools.product([1, k], repeat=batch):
        assert split_seconds([list(feeds)], priced)[0][0] == pytest.approx(engine(list(feeds)))
    # and the prediction: the speculating server's steps from the mixed timings, the baseline at the plain server's
    joint = np.zeros((k, k))
    joint[0, 0], joint[k - 1, 2] = 0.5, 0.5  # half the steps draft k - 1 and keep 2 of them
    got = predict_equal_split(joint, batch, priced, 0.0, np.random.default_rng(3), samples=20_000, base_step=0.030)
    exact = sum(0.5 ** batch * engine([k if d else 1 for d in ds]) for ds in itertools.product([0, 1], repeat=batch))
    assert abs(got.prediction.iteration_seconds - exact) < 4 * got.iteration_standard_error + 1e-12
    assert got.prediction.speedup == pytest.approx(got.prediction.throughput / (batch / 0.030))
    with pytest.raises(SpecdecError, match="r = 0..%d" % batch):
        mixed_ubatches(u, mixed[:-1], k)
    with pytest.raises(SpecdecError, match="no slower than the plain step"):
        mixed_ubatches(u, [mixed[0]] * (batch + 1), k)


def test_the_plan_prices_a_draft_length_by_its_servers_mixed_steps() -> None:
    """`equal_split_plan(mixed=)`: gamma = K - 1 at a B whose mixed steps were timed is the Monte Carlo
    of that server's steps (each slot drafting gamma on a share s, `mixed_ubatches`) against the plain
    server's t(B, 1); at a B between two timed ones its price from t(B, k) scaled by the two ratios,
    linear in B; every other gamma, and no speculation, as without them."""
    K, s, alphas, c = 5, 0.6, [0.8, 0.7, 0.6, 0.5], 0.01
    sizes = [1, 2, 3, 4]
    t = np.array([[0.020 + 0.002 * B * k for k in range(1, K + 1)] for B in sizes])
    t[2] = (t[1] + t[3]) / 2  # B = 3 untimed: interpolated, as `gamma_ranges` hands it over
    mixed = {K: {B: [0.019 + 0.001 * B] + [0.019 + 0.001 * B + 0.012 + 0.003 * r for r in range(1, B)]
                 + [t[i, K - 1]] for i, B in enumerate(sizes) if B != 3}}
    plain = equal_split_plan(alphas, sizes, t, c, share=s)
    plan = equal_split_plan(alphas, sizes, t, c, share=s, mixed=mixed)
    assert np.array_equal(plan.iteration_seconds[:, :K - 1], plain.iteration_seconds[:, :K - 1])
    tokens = plan.expected_tokens[K - 1]  # 1 + s (E(gamma) - 1)
    ratios = {}
    for i, B in enumerate(sizes):
        if B == 3:
            continue
        u = mixed_ubatches(ubatch_seconds({b: t[j] for j, b in enumerate(sizes)}, B, K), mixed[K][B], K)
        joint = s * joint_from_alphas(alphas, K - 1)
        joint[0, 0] += 1 - s
        mc = predict_equal_split(joint, B, u, 0.0, np.random.default_rng(B), samples=40_000, base_step=t[i, 0])
        split = plan.iteration_seconds[i, K - 1] - s * (K - 1) * c * t[i, 0]
        assert abs(mc.prediction.iteration_seconds - split) < 4 * mc.iteration_standard_error
        assert plan.speedup[i, K - 1] == pytest.approx(tokens * t[i, 0] / plan.iteration_seconds[i, K - 1])
        ratios[B] = split / (plain.iteration_seconds[i, K - 1] - s * (K - 1) * c * t[i, 0])
    assert ratios[2] != pytest.approx(1.0, abs=0.01)  # the mixed steps do price it otherwise
    between = plain.iteration_seconds[2, K - 1] - s * (K - 1) * c * t[2, 0]
    assert plan.iteration_seconds[2, K - 1] == pytest.approx(between * (ratios[2] + ratios[4]) / 2
                                                            + s * (K - 1) * c * t[2, 0])


def test_refusals() -> None:
    joint = joint_from_alphas([0.8], 2)
    with pytest.raises(SpecdecError, match="u\\(r, m\\)"):
        predict_equal_split(joint, 4, _table(2, 3), 0.0, np.random.default_rng(0))  # no rows 3, 4
    with pytest.raises(SpecdecError, match="u\\(r, m\\)"):
        predict_equal_split(joint, 2, _table(2, 2), 0.0, np.random.default_rng(0))  # feeds of 3 untimed
    with pytest.raises(SpecdecError, match="batch size"):
        predict_equal_split(joint, 0, _table(2, 3), 0.0, np.random.default_rng(0))
    with pytest.raises(SpecdecError, match="at least its pending token"):
        split_seconds([[0, 2]], _table(2, 3))
