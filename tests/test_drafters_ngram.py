"""NgramDrafter follows the drafter protocol and its proposals are consistent with q.

- greedy: tokens are the argmax chain of q, q is None, no random numbers are drawn;
- sampling: q rows are SamplingConfig.probs(log q) of the right contexts, and the first
  drafted token follows q[0]: Pearson chi-square, N = 20,000 draws, significance 1e-3,
  fixed seed (top-k 8 keeps the cells well filled);
- seeded runs repeat exactly; start/commit carry the context state;
- greedy speculative decoding with the n-gram drafter reproduces greedy target decoding on
  a tiny real Llama model over the same 500-id vocabulary.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.reference.core.seams import NO_PASS, Verdict
from specdec.reference.drafters.ngram import NgramDrafter
from specdec.reference.core.policy import ConfidenceThreshold
from specdec.reference.core.sampling import SamplingConfig
from tests.stats_helpers import chi_square_pvalue
from tests.ngram_corpus import VOCAB

GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(scope="module")
def prompt(corpus_file) -> list[int]:
    return [int(t) for t in corpus_file.read_text().split()[:10]]


def test_greedy_proposal_is_the_argmax_chain(tiny_models, prompt) -> None:
    drafter = NgramDrafter(tiny_models[3], VOCAB)
    drafter.start(prompt)
    generator = torch.Generator().manual_seed(0)
    before = generator.get_state()
    proposal = drafter.propose(6, GREEDY, generator)
    assert proposal.q is None and proposal.tokens.dtype == torch.long
    assert torch.equal(generator.get_state(), before)  # greedy draws nothing
    model, context = drafter.model, list(prompt)
    for token in proposal.tokens.tolist():
        q = model.q(model.state_for(context))
        assert token == int(np.argmax(q))
        context.append(token)


def test_sampled_proposal_rows_are_the_adjusted_q(tiny_models, prompt) -> None:
    sampling = SamplingConfig(temperature=0.7, top_k=20, top_p=0.95)
    drafter = NgramDrafter(tiny_models[4], VOCAB)
    drafter.start(prompt)
    proposal = drafter.propose(5, sampling, torch.Generator().manual_seed(3))
    assert proposal.q is not None and proposal.q.shape == (len(proposal), VOCAB)
    assert proposal.q.dtype == torch.float32
    context = list(prompt)
    for i, token in enumerate(proposal.tokens.tolist()):
        log_q = torch.from_numpy(drafter.model.log_q(drafter.model.state_for(context)))
        torch.testing.assert_close(proposal.q[i], sampling.probs(log_q))
        assert proposal.q[i, token] > 0
        assert abs(float(proposal.q[i].sum()) - 1) < 1e-5
        assert int((proposal.q[i] > 0).sum()) <= 20  # top-k applied as for the target
        context.append(token)


def test_first_drafted_token_follows_q(tiny_models, prompt) -> None:
    sampling = SamplingConfig(temperature=1.0, top_k=8)
    drafter = NgramDrafter(tiny_models[2], VOCAB)
    generator = torch.Generator().manual_seed(1234)
    n = 20_000
    counts = np.zeros(VOCAB)
    drafter.start(prompt)
    q0 = drafter.propose(1, sampling, generator).q[0].numpy()
    for _ in range(n):
        counts[int(drafter.propose(1, sampling, generator).tokens[0])] += 1
    assert counts[q0 == 0].sum() == 0
    assert chi_square_pvalue(counts, q0) > 1e-3


def test_seeded_runs_repeat(tiny_models, prompt) -> None:
    sampling = SamplingConfig(temperature=1.0)

    def run() -> list[list[int]]:
        drafter = NgramDrafter(tiny_models[5], VOCAB)
        drafter.start(prompt)
        generator = torch.Generator().manual_seed(7)
        out = []
        for _ in range(5):
            proposal = drafter.propose(4, sampling, generator)
            out.append(proposal.tokens.tolist())
            drafter.commit(Verdict(min(2, len(proposal)), torch.tensor(proposal.tokens.tolist()[:2] + [11]), False),
                           NO_PASS)
        return out

    assert run() == run()


def test_start_and_commit_carry_the_context(tiny_models, prompt) -> None:
    drafter = NgramDrafter(tiny_models[4], VOCAB)
    drafter.start(torch.tensor(prompt))
    assert drafter._state == drafter.model.state_for(prompt)
    proposal = drafter.propose(3, GREEDY, None)
    drafter.commit(Verdict(1, torch.tensor(proposal.tokens.tolist()[:1] + [42]), False), NO_PASS)
    assert drafter._state == drafter.model.state_for(prompt + proposal.tokens.tolist()[:1] + [42])
    drafter.start([])  # an empty prompt: sentence-start context
    assert drafter._state == drafter.model.begin()
    assert len(drafter.propose(0, SamplingConfig(), None)) == 0


def test_confidence_policy_stops_before_an_unsure_position(tiny_models, prompt) -> None:
    drafter = NgramDrafter(tiny_models[3], VOCAB, stop_at_eos=False)
    drafter.start(prompt)
    model = drafter.model
    assert len(drafter.propose(6, GREEDY, None, keep_going=ConfidenceThreshold(0.0, 0, 6).keep_going)) == 6
    assert len(drafter.propose(6, GREEDY, None, keep_going=lambda i, q: False)) == 0
    threshold = 0.3
    for sampling in (GREEDY, SamplingConfig(temperature=1.0)):
        proposal = drafter.propose(8, sampling, torch.Generator().manual_seed(0),
                                   keep_going=ConfidenceThreshold(threshold, 0, 8).keep_going)
        context = list(prompt)
        for token in proposal.tokens.tolist():  # every drafted position was confident (unadjusted q)
            assert model.q(model.state_for(context)).max() >= threshold
            context.append(token)
        if len(proposal) < 8:  # stopped: the next position is unsure
            assert model.q(model.state_for(context)).max() < threshold


def test_drafting_stops_at_eos(tmp_path) -> None:
    from specdec.ngram.build import build_model
    from tests.ngram_corpus import require_kenlm_tools

    require_kenlm_tools()
    text = tmp_path / "t.txt"
    text.write_text("5 6 7\n" * 50 + "5 6 8 9\n" * 3)  # </s> is by far the likeliest after "6 7"
    folder = build_model(text, 3, tmp_path / "m", vocab_size=20, eos_id=19, memory="100M").out
    drafter = NgramDrafter(folder, 20)
    drafter.start([5, 6])
    proposal = drafter.propose(6, GREEDY, None)
    assert proposal.tokens.tolist() == [7, 19]


def test_score_sequence_matches_q(tiny_models, prompt) -> None:
    drafter = NgramDrafter(tiny_models[3], VOCAB)
    rows = drafter.score_sequence(prompt)
    assert rows.shape == (len(prompt), VOCAB)
    np.testing.assert_allclose(rows[-1], drafter.model.q(drafter.model.state_for(prompt)), rtol=1e-6)


def test_greedy_speculative_decoding_equals_greedy_target(tiny_models, prompt) -> None:
    decoder = pytest.importorskip("specdec.reference.core.loop")
    from specdec.reference.model.target import TargetScorer
    from tests.tiny_models import tiny_llama

    target = tiny_llama(vocab_size=VOCAB, seed=0, sharpness=8.0)
    reference = decoder.autoregressive_decode(TargetScorer(target), prompt, 24, GREEDY, None).tokens
    for order, gamma in ((1, 3), (3, 1), (5, 4)):
        result = decoder.speculative_decode(TargetScorer(target), NgramDrafter(tiny_models[order], VOCAB),
                                            prompt, 24, gamma, GREEDY, None)
        assert result.tokens == reference, (order, gamma)
