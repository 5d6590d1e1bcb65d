"""The alpha estimator (Corollary 3.6) on tiny real and hand-built models.

- a model against itself: alpha = 1 at every sampling setting;
- disjoint supports (a tiny Llama masked to even ids vs one masked to odd ids): alpha = 0;
- a context-free pair with known p and q: alpha = sum min(p, q) computed by hand, also under
  temperature, top-k and lenience; a deterministic drafter gives p(proposal) and counts
  missing proposals as rejections;
- the batched teacher-forced fast paths (neural, n-gram) equal the generic protocol path;
- batched generation (ragged prompts) equals the decoder's greedy output; sampled, it is what
  the decode step emits with no drafter, whatever the batch; seeded sampling repeats exactly;
- the percentile bootstrap over prompts covers the true alpha at about its nominal rate:
  400 simulated data sets of 40 prompts, coverage in [0.90, 0.99] (binomial sd 0.011).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode
from specdec.reference.estimate.alpha import estimate_alpha
from specdec.reference.measure.bootstrap import bootstrap_ratio_ci
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.estimate.samples import generate_continuations
from specdec.reference.estimate.teacher_forced import NeuralScorer, ProtocolScorer, score_positions
from tests.fakes import ConstantLM, FixedTokenDrafter, MaskedLM, TINY_VOCAB, assert_same_scores, random_prompts
from tests.tiny_models import tiny_llama

SETTINGS = [SamplingConfig(0.0), SamplingConfig(1.0), SamplingConfig(0.7, top_k=5), SamplingConfig(1.3, top_p=0.8)]
IDS = ["greedy", "t1", "t0.7-topk5", "t1.3-topp0.8"]


def _samples(model, sampling, n=6, new=20, length=7, seed=0):
    return generate_continuations(model, random_prompts(n, length, seed=seed), new, sampling,
                                  seed, batch_size=4)


@pytest.mark.parametrize("sampling", SETTINGS, ids=IDS)
def test_model_against_itself_is_one(sampling: SamplingConfig) -> None:
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=8.0)
    samples = _samples(target, sampling)
    est = estimate_alpha(target, NeuralDrafter(target, TINY_VOCAB), samples, TINY_VOCAB, np.random.default_rng(0),
                         lenience=(1.0, 0.5), n_boot=200)
    assert est.alpha == pytest.approx(1.0, abs=1e-6)
    assert est.alpha_ci[0] == pytest.approx(1.0, abs=1e-6)
    assert est.alpha_lenience == pytest.approx((1.0, 1.0), abs=1e-6)
    assert est.n_positions == 6 * 20 and est.proposal_rate == 1.0


@pytest.mark.parametrize("sampling", SETTINGS[:2], ids=IDS[:2])
def test_disjoint_support_is_zero(sampling: SamplingConfig) -> None:
    even, odd = range(0, TINY_VOCAB, 2), range(1, TINY_VOCAB, 2)
    target = MaskedLM(tiny_llama(TINY_VOCAB, seed=0, sharpness=2.0), even)
    draft = MaskedLM(tiny_llama(TINY_VOCAB, seed=1, sharpness=2.0), odd)
    samples = _samples(target, sampling)
    assert all(t % 2 == 0 for c in samples.continuations for t in c)
    est = estimate_alpha(target, NeuralDrafter(draft, TINY_VOCAB), samples, TINY_VOCAB, np.random.default_rng(0),
                         lenience=(1.0, 0.1), n_boot=200)
    assert est.alpha == 0.0 and est.alpha_ci == (0.0, 0.0)
    assert est.alpha_lenience == (0.0, 0.0)  # min(p / l, q) is still 0 on disjoint supports


# A context-free pair: p = softmax(P_LOGITS), q = softmax(Q_LOGITS), known exactly.
P = np.array([0.5, 0.3, 0.2, 0.0])
Q = np.array([0.1, 0.6, 0.2, 0.1])


def _logits(probs: np.ndarray) -> list[float]:
    with np.errstate(divide="ignore"):
        return np.log(probs).tolist()


def _adjust(probs: np.ndarray, temperature: float, top_k: int = 0) -> np.ndarray:
    """The sampling transform by hand: p^(1/T) renormalised, then the top-k kept."""
    x = probs ** (1.0 / temperature)
    if top_k:
        x = np.where(x >= np.sort(x)[-top_k], x, 0.0)
    return x / x.sum()


@pytest.mark.parametrize("temperature, top_k", [(1.0, 0), (2.0, 0), (0.5, 0), (1.0, 2)])
def test_hand_computable_pair(temperature: float, top_k: int) -> None:
    target, draft = ConstantLM(_logits(P)), ConstantLM(_logits(Q))
    sampling = SamplingConfig(temperature, top_k=top_k)
    samples = _samples(target, sampling, n=3, new=5, length=4)
    lenience = (1.0, 0.5, 0.25)
    scores = score_positions(target, NeuralScorer(draft), samples, sampling, 4, lenience)
    p, q = _adjust(P, temperature, top_k), _adjust(Q, temperature, top_k)
    for s in scores:
        np.testing.assert_allclose(s.beta, np.minimum(p, q).sum(), atol=1e-6)
        for i, l in enumerate(lenience):
            np.testing.assert_allclose(s.beta_lenient[i], np.minimum(p / l, q).sum(), atol=1e-6)
    if (temperature, top_k) == (1.0, 0):
        assert np.minimum(p, q).sum() == pytest.approx(0.6)  # 0.1 + 0.3 + 0.2 + 0
        assert np.minimum(p / 0.5, q).sum() == pytest.approx(0.9)  # 0.1 + 0.6 + 0.2 + 0
    if top_k == 2:
        assert np.minimum(p, q).sum() == pytest.approx(0.375)  # p -> [.625, .375, 0, 0], q -> [0, .75, .25, 0]


def test_hand_computable_pair_greedy() -> None:
    target, draft = ConstantLM(_logits(P)), ConstantLM(_logits(Q))
    sampling = SamplingConfig(0.0)
    samples = _samples(target, sampling, n=2, new=5, length=4)
    est = estimate_alpha(target, NeuralDrafter(draft, 4), samples, 4, np.random.default_rng(0), (1.0, 0.5), n_boot=50)
    assert est.alpha == 0.0  # argmax p = 0, argmax q = 1
    # App. A.5's argmax rule: accept x = 1 when p(1) = 0.3 >= l * max p = 0.5 l
    assert est.alpha_lenient_argmax == (0.0, 1.0)


def test_deterministic_drafter_beta_is_p_of_the_proposal() -> None:
    target = ConstantLM(_logits(P))
    samples = _samples(target, SamplingConfig(1.0), n=4, new=8, length=4)
    est = estimate_alpha(target, FixedTokenDrafter(1), samples, 4, np.random.default_rng(0), (1.0, 0.5), n_boot=50)
    assert est.alpha == pytest.approx(0.3) and est.proposal_rate == 1.0
    assert est.alpha_lenience == pytest.approx((0.3, 0.6))  # min(p(x) / l, 1)
    # no proposal at every other position: rejections in alpha, excluded in alpha_when_proposed
    est = estimate_alpha(target, FixedTokenDrafter(1, skip_every=2), samples, 4, np.random.default_rng(0),
                         (1.0,), n_boot=50)
    assert est.proposal_rate == pytest.approx(0.5)
    assert est.alpha == pytest.approx(0.15) and est.alpha_when_proposed == pytest.approx(0.3)
    greedy = _samples(target, SamplingConfig(0.0), n=2, new=6, length=4)
    est = estimate_alpha(target, FixedTokenDrafter(0), greedy, 4, np.random.default_rng(0), (1.0,), n_boot=50)
    assert est.alpha == 1.0  # argmax agreement


@pytest.mark.parametrize("sampling", SETTINGS, ids=IDS)
def test_batched_neural_scoring_equals_protocol(sampling: SamplingConfig) -> None:
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=6.0)
    draft = tiny_llama(TINY_VOCAB, seed=1, sharpness=6.0)
    samples = _samples(target, sampling, n=4, new=12)
    fast = score_positions(target, NeuralScorer(draft), samples, sampling, TINY_VOCAB, (1.0, 0.5), max_gamma=4)
    slow = score_positions(target, ProtocolScorer(NeuralDrafter(draft, TINY_VOCAB), max_gamma=4,
                                                  generator=torch.Generator().manual_seed(0)),
                           samples, sampling, TINY_VOCAB, (1.0, 0.5), max_gamma=4)
    assert_same_scores(fast, slow, sampling.greedy, atol=1e-5)


def test_batched_generation_of_ragged_prompts_equals_greedy_decoding() -> None:
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=8.0)
    prompts = [p[:n] for p, n in zip(random_prompts(5, 9, seed=3), (9, 3, 6, 1, 8))]
    samples = generate_continuations(target, prompts, 15, SamplingConfig(0.0), None, batch_size=5)
    for prompt, cont in zip(prompts, samples.continuations):
        assert cont == autoregressive_decode(TargetScorer(target), prompt, 15, SamplingConfig(0.0), None).tokens


def test_samples_are_the_decode_steps_output_with_no_drafter_whatever_the_batch() -> None:
    """At T > 0 the samples are decode_batch's outputs at gamma 0 for the same seed (request i's
    generator seeded (seed, i)), and prompt i's continuation is the same alone and among 8."""
    from specdec.reference.core.batch_loop import decode_batch
    from specdec.reference.drafters.protocol import NoDrafter
    from specdec.reference.model.batch_scorer import BatchScorer

    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=2.0)
    prompts = [p[:n] for p, n in zip(random_prompts(8, 9, seed=4), (9, 3, 6, 1, 8, 2, 9, 5))]
    sampling = SamplingConfig(1.0)
    batched = generate_continuations(target, prompts, 14, sampling, 7, batch_size=8).continuations
    decoded = decode_batch(BatchScorer(target, 8, 32), NoDrafter(), prompts, 14, 0, sampling, seed=7)
    assert batched == [tokens for _, tokens in sorted(decoded.outputs)]
    alone = generate_continuations(target, prompts[5:6], 14, sampling, 7, indices=[5], batch_size=1)
    assert alone.continuations == [batched[5]]
    assert len({tuple(c) for c in batched}) == 8  # the draws differ from prompt to prompt


def test_seeded_sampling_repeats_exactly() -> None:
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=4.0)
    a = _samples(target, SamplingConfig(1.0), seed=5)
    b = _samples(target, SamplingConfig(1.0), seed=5)
    assert a.continuations == b.continuations
    assert a.continuations != _samples(target, SamplingConfig(1.0), seed=6).continuations


def test_bootstrap_interval_covers_at_nominal_rate() -> None:
    rng = np.random.default_rng(12345)
    experiments, prompts, per_prompt, true_alpha = 400, 40, 50, 0.4
    covered = 0
    for _ in range(experiments):
        mu = rng.beta(4, 6, size=prompts)  # per-prompt acceptance, mean 0.4
        sums = rng.binomial(per_prompt, mu).astype(float)  # beta in {0, 1} (greedy-like)
        lo, hi = bootstrap_ratio_ci(sums, np.full(prompts, float(per_prompt)), rng, n_boot=500)
        covered += lo <= true_alpha <= hi
    assert 0.90 <= covered / experiments <= 0.99


def test_bootstrap_rejects_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci(np.array([]), np.array([]), rng)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci(np.array([1.0]), np.array([2.0]), rng, confidence=1.5)
    assert bootstrap_ratio_ci(np.array([1.0]), np.array([2.0]), rng) == (0.5, 0.5)


def test_lenience_out_of_range_is_an_error() -> None:
    target = ConstantLM(_logits(P))
    samples = _samples(target, SamplingConfig(1.0), n=1, new=2, length=2)
    with pytest.raises(ValueError, match="lenience"):
        estimate_alpha(target, FixedTokenDrafter(1), samples, 4, np.random.default_rng(0), (1.5,))


def test_per_position_alpha_weights_by_the_acceptance_along_the_sequence() -> None:
    """Draft 2's acceptance given draft 1's, at T > 0: p puts 1/2 on A and 1/2 on B, the draft
    proposes A then C, and after A the target always says C (after B rarely: beta_2 = 0.1).
    Accepted drafts 1 are always A, so alpha_2 = 1; the product of the betas, blind to which
    token the sequence took, would give (0.5 * 1 + 0.5 * 0.1) / 1 = 0.55."""
    from specdec.reference.estimate.alpha import positional_alphas
    from specdec.reference.estimate.teacher_forced import PositionScores

    def sequence(took_a: bool) -> PositionScores:
        beta = np.array([0.5, 0.5])
        return PositionScores(beta, beta[None], None, np.ones(2, dtype=bool),
                              offset_beta=np.array([[0.5, 0.5], [1.0 if took_a else 0.1, np.nan]]),
                              path_accept=np.array([[float(took_a), float(took_a)], [1.0, 0.0]]))

    alphas = positional_alphas([sequence(True), sequence(False)] * 5, np.random.default_rng(0), 100, 0.95)
    assert [a for a, _ in alphas] == pytest.approx([0.5, 1.0])
