"""Teacher-forced replay of greedy speculative decoding equals the real decoder, count for count.

At temperature 0 the decoder emits the target's greedy sequence, so the accepted-length
histogram, reached/accepted counts and drafted totals are determined by the teacher-forced
blocks (`specdec.reference.estimate.replay`) -- except, for the n-gram drafter, blocks cut short by an EOS
the drafter proposes after its first mismatch (drafted total then an upper bound).
Checked for a neural drafter, prompt lookup and a KenLM n-gram drafter on tiny real models,
gamma in {1, 3, 5}. At T = 1 the replay gives expected counts (the acceptance along the
target's own sequence, docs/estimator.md "Replay"): its dynamic programme equals simulated
Bernoulli acceptances, and its expected iterations per run equal real sampled decodes' mean
(two-sample z-test) for a neural chain, prompt lookup, heads and a feature draft. Also: the
n-gram fast path (`score_sequence`) equals the generic protocol path at T = 0 and T = 1.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.ngram import NgramDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.estimate.replay import replay
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.estimate.samples import generate_continuations
from specdec.reference.estimate.teacher_forced import NgramScorer, ProtocolScorer, score_positions
from tests.fakes import TINY_VOCAB, assert_same_scores, decode_stats, random_prompts
from tests.ngram_corpus import VOCAB
from tests.tiny_models import tiny_llama

GREEDY = SamplingConfig(0.0)
MAX_GAMMA = 6


def _check_replay(target, make_drafter, samples, vocab, exact_drafted: bool = True):
    scores = score_positions(target, make_drafter().teacher_forced_scorer(target, MAX_GAMMA, None), samples, GREEDY, vocab,
                             max_gamma=MAX_GAMMA)
    for gamma in (1, 3, 5):
        replayed, k_hist = replay([s.accept() for s in scores], [s.block for s in scores], gamma, MAX_GAMMA)
        decoded = decode_stats(target, make_drafter, samples, gamma)
        assert replayed.accepted_hist == decoded.accepted_hist
        assert replayed.reached == decoded.reached and replayed.accepted == decoded.accepted
        assert (replayed.iterations, replayed.bonus, replayed.new_tokens) == \
            (decoded.iterations, decoded.bonus, decoded.new_tokens)
        if exact_drafted:
            assert replayed.drafted == decoded.drafted
        else:  # an EOS after the first mismatch shortens a block in a way teacher forcing cannot see
            assert decoded.drafted <= replayed.drafted
        assert k_hist.sum() == replayed.iterations and (k_hist * np.arange(gamma + 1)).sum() == replayed.drafted


@pytest.mark.parametrize("kind", ["neural", "lookup"])
def test_replay_equals_decoder_on_tiny_models(kind: str) -> None:
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=8.0)
    # a draft close to the target (same init, perturbed head) so that runs of acceptances occur
    draft = tiny_llama(TINY_VOCAB, seed=0, sharpness=8.0)
    with torch.no_grad():
        draft.lm_head.weight.add_(torch.randn(draft.lm_head.weight.shape, generator=torch.Generator().manual_seed(1)))
    samples = generate_continuations(target, random_prompts(5, 12, seed=2), 30, GREEDY, None)
    make = (lambda: NeuralDrafter(draft, TINY_VOCAB)) if kind == "neural" else (lambda: PromptLookupDrafter(2))
    _check_replay(target, make, samples, TINY_VOCAB)


def test_replay_equals_decoder_with_an_ngram_drafter(tiny_models, corpus_file) -> None:
    target = tiny_llama(VOCAB, seed=0, sharpness=4.0)
    lines = corpus_file.read_text().splitlines()
    prompts = [[int(t) for t in line.split()[:8]] for line in lines if len(line.split()) >= 8][:4]
    samples = generate_continuations(target, prompts, 25, GREEDY, None)
    # the n-gram drafter stops a block after proposing EOS (here </s> at line ends is often
    # its argmax): acceptance counts are exact, the drafted total an upper bound
    _check_replay(target, lambda: NgramDrafter(tiny_models[3], VOCAB), samples, VOCAB, exact_drafted=False)


@pytest.mark.parametrize("sampling", [SamplingConfig(0.0), SamplingConfig(1.0), SamplingConfig(0.8, top_k=20)],
                         ids=["greedy", "t1", "t0.8-topk20"])
def test_ngram_fast_path_equals_protocol(tiny_models, corpus_file, sampling) -> None:
    target = tiny_llama(VOCAB, seed=0, sharpness=4.0)
    lines = corpus_file.read_text().splitlines()
    prompts = [[int(t) for t in line.split()[:6]] for line in lines if len(line.split()) >= 6][:3]
    samples = generate_continuations(target, prompts, 10, sampling, 0)
    drafter = NgramDrafter(tiny_models[4], VOCAB)
    assert isinstance(drafter.teacher_forced_scorer(target, 16, None), NgramScorer)
    fast = score_positions(target, NgramScorer(drafter), samples, sampling, VOCAB, (1.0, 0.5), max_gamma=4)
    slow = score_positions(target, ProtocolScorer(NgramDrafter(tiny_models[4], VOCAB), 4, torch.Generator()),
                           samples, sampling, VOCAB, (1.0, 0.5), max_gamma=4)
    assert_same_scores(fast, slow, sampling.greedy, atol=2e-5)


def test_replay_equals_simulated_acceptance_along_the_sequence() -> None:
    """The dynamic programme's expected counts equal the mean of the walk it describes (an
    iteration at t proposes k = min(block[t], room) drafts, accepts the leading successes of
    Bernoulli(accept[i, t]), moves to t + A + 1), simulated 20,000 times: within 4 standard errors."""
    rng = np.random.default_rng(0)
    n, width, gamma, runs = 14, 4, 3, 20_000
    accept, block = rng.uniform(0.2, 1.0, (width, n)), rng.integers(0, width + 1, n)
    stats, _ = replay([accept], [block], gamma, width)
    iterations, accepted = np.zeros(runs), np.zeros((runs, gamma))
    for r in range(runs):
        t = 0
        while t < n:
            k = min(gamma, n - t - 1, int(block[t])) if n - t - 1 > 0 else 0
            a = 0
            while a < k and rng.random() < accept[a, t]:
                a += 1
            accepted[r, :a] += 1
            iterations[r] += 1
            t += a + 1
    for expected, simulated in [(stats.iterations, iterations), *zip(stats.accepted, accepted.T)]:
        assert abs(expected - simulated.mean()) <= 4 * simulated.std() / np.sqrt(runs) + 1e-12
    assert stats.new_tokens == n and np.isclose(sum(stats.accepted_hist), stats.iterations)


@pytest.mark.parametrize("kind", ["neural", "lookup", "heads", "eagle"])
def test_sampled_replay_equals_the_decoder_in_expectation(kind: str) -> None:
    """At T = 1 the replay's expected iterations per run of 20 tokens (one target sample per
    prompt) equal the mean over real speculative decodes (two per prompt): two-sample z-test,
    |z| <= 3.5 (a false alarm 5e-4 of the time), 60 prompts."""
    from specdec.reference.core.loop import speculative_decode
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.drafters.eagle import EagleDrafter
    from specdec.reference.drafters.heads import HeadsDrafter
    from tests.fakes import random_eagle, random_heads

    sampled = SamplingConfig(1.0)
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=8.0)
    draft = tiny_llama(TINY_VOCAB, seed=0, sharpness=8.0)
    with torch.no_grad():
        draft.lm_head.weight.add_(torch.randn(draft.lm_head.weight.shape, generator=torch.Generator().manual_seed(1)))
    make = {"neural": lambda: NeuralDrafter(draft, TINY_VOCAB), "lookup": lambda: PromptLookupDrafter(1),
            "heads": lambda h=random_heads(target, 3, scale=0.05): HeadsDrafter(h, TINY_VOCAB),
            "eagle": lambda e=random_eagle(target, scale=0.05): EagleDrafter(e, TINY_VOCAB)}[kind]
    prompts, n, gamma = random_prompts(60, 8, seed=3), 20, 3
    samples = generate_continuations(target, prompts, n, sampled, 11)
    scores = score_positions(target, make().teacher_forced_scorer(target, MAX_GAMMA, None), samples, sampled,
                             TINY_VOCAB, max_gamma=MAX_GAMMA)
    replayed = np.array([replay([s.accept()], [s.block], gamma, MAX_GAMMA)[0].iterations for s in scores])
    g = torch.Generator().manual_seed(5)
    decoded = np.array([speculative_decode(TargetScorer(target), make(), p, n, gamma, sampled, g).stats.iterations
                        for p in prompts for _ in range(2)])
    se = np.sqrt(replayed.var(ddof=1) / replayed.size + decoded.var(ddof=1) / decoded.size)
    assert abs(replayed.mean() - decoded.mean()) <= 3.5 * se
    assert decoded.mean() < n  # drafts were accepted: the test has something to compare


def test_replay_rejects_gamma_beyond_the_recorded_blocks() -> None:
    with pytest.raises(ValueError, match="gamma"):
        replay([np.zeros(3, dtype=np.int64)], [np.full(3, 2)], 3, 2)
