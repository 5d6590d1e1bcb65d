"""Teacher-forced replay of greedy speculative decoding equals the real decoder, count for count.

At temperature 0 the decoder emits the target's greedy sequence, so the accepted-length
histogram, reached/accepted counts and drafted totals are determined by the teacher-forced
blocks (`specdec.reference.estimate.replay`) -- except, for the n-gram drafter, blocks cut short by an EOS
the drafter proposes after its first mismatch (drafted total then an upper bound).
Checked for a neural drafter, prompt lookup and a KenLM n-gram drafter on tiny real models,
gamma in {1, 3, 5}. Also: the n-gram fast path (`score_sequence`) equals the generic
protocol path at T = 0 and T = 1.
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
        replayed, k_hist = replay([s.match for s in scores], [s.block for s in scores], gamma, MAX_GAMMA)
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


def test_replay_rejects_gamma_beyond_the_recorded_blocks() -> None:
    with pytest.raises(ValueError, match="gamma"):
        replay([np.zeros(3, dtype=np.int64)], [np.full(3, 2)], 3, 2)
