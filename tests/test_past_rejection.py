"""The draft's confidence right after its own rejected token (issue 52, `estimate.past_rejection`):
the one-pass branch scoring equals a forward over each prefix; the rejected tokens and weights by
hand (T = 0: the draft's wrong argmaxes; T > 0: (q - p)+ read at quantiles, exact where its masses
are multiples of 1/BRANCHES, summing to 1 - beta always); the estimator stores them for a neural
and an n-gram draft; and a Monte Carlo where a draft past a rejection is more confident than on
the sequence: the law with the stored past-rejection counts predicts its drafts per iteration,
row 1 in their place does not."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.ngram import NgramDrafter
from specdec.reference.estimate.alpha import estimate_alpha
from specdec.reference.estimate.confidence import past_rejection_counts, position_counts
from specdec.reference.estimate.past_rejection import BRANCHES, rejected_tokens
from specdec.reference.estimate.replay import accept_from_match
from specdec.reference.estimate.samples import generate_continuations
from specdec.reference.estimate.teacher_forced import DraftRows, NeuralScorer, NgramScorer
from specdec.reference.model.forward import branch_logits
from specdec.simulator.dynamic import confidence_law, threshold_prediction
from tests.fakes import TINY_VOCAB, random_prompts
from tests.ngram_corpus import VOCAB
from tests.tiny_models import tiny_llama


def test_one_pass_equals_a_forward_over_each_prefix() -> None:
    model = tiny_llama(TINY_VOCAB, seed=1, sharpness=4.0)
    sequence = torch.randint(0, TINY_VOCAB, (30,), generator=torch.Generator().manual_seed(0)).tolist()
    starts, tokens = [1, 7, 7, 29, 30], [3, 5, 11, 0, 9]  # two branches at one position; one past the last token
    with torch.inference_mode():
        got = branch_logits(model, sequence, starts, tokens)
        for j, (start, token) in enumerate(zip(starts, tokens)):
            want = model(input_ids=torch.tensor([sequence[:start] + [token]])).logits[0, -1]
            assert torch.allclose(got[j], want, atol=1e-5), (start, token)
    from tests.tiny_seq2seq import tiny_t5

    assert branch_logits(tiny_t5(TINY_VOCAB), sequence, starts, tokens) is None  # no token tree on its decoder


def test_rejected_tokens_at_t0_are_the_drafts_wrong_argmaxes() -> None:
    draft = DraftRows(None, torch.tensor([4, 2, -1, 7, 3]), chain=True, stop_token=3)
    t, x, w = rejected_tokens(torch.zeros(5, 8), draft, [4, 5, 6, 1, 0], SamplingConfig(0.0))
    # position 0 accepted, 2 proposes nothing, 4 proposes the stop token (it drafts nothing after it)
    assert t.tolist() == [1, 3] and x.tolist() == [2, 7] and w.tolist() == [1.0, 1.0]


def test_rejected_tokens_at_t1_read_the_residual_at_quantiles() -> None:
    p = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.25, 0.25, 0.25, 0.25]])
    q = torch.tensor([[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]])
    draft = DraftRows(q, None, chain=True)
    t, x, w = rejected_tokens(p.log(), draft, [0, 0], SamplingConfig(1.0))
    # (q - p)+ = [0, 0.3, 0, 0.1]: 12 and 4 of the 16 quantiles, weights exactly 0.3 and 0.1; row 2: p = q, none
    assert BRANCHES == 16 and t.tolist() == [0, 0] and sorted(zip(x.tolist(), w.tolist())) == [(1, pytest.approx(0.3)),
                                                                                               (3, pytest.approx(0.1))]
    rng = np.random.default_rng(0)
    p, q = (torch.from_numpy(rng.dirichlet(np.full(50, 0.3), size=6)) for _ in range(2))
    t, x, w = rejected_tokens(p.log(), DraftRows(q, None, chain=True), [0] * 6, SamplingConfig(1.0))
    residual = (q - p).clamp_min(0).numpy()
    assert np.bincount(t, weights=w, minlength=6) == pytest.approx(residual.sum(1))  # 1 - beta per position
    assert np.all(residual[t, x] > 0) and len(set(zip(t.tolist(), x.tolist()))) == t.size  # one branch per token


def near(model: torch.nn.Module, noise: float) -> torch.nn.Module:
    """`model` with its output layer perturbed: a draft that agrees with it at some positions only."""
    with torch.no_grad():
        model.lm_head.weight.add_(noise * torch.randn(model.lm_head.weight.shape,
                                                      generator=torch.Generator().manual_seed(5)))
    return model


@pytest.mark.parametrize("sampling", [SamplingConfig(0.0), SamplingConfig(1.0)], ids=["greedy", "t1"])
def test_the_estimator_stores_the_neural_drafts_confidence_after_its_rejections(sampling) -> None:
    target = tiny_llama(TINY_VOCAB, seed=0, sharpness=4.0)
    draft = near(tiny_llama(TINY_VOCAB, seed=0, sharpness=4.0), 0.02)  # alpha about 0.6 at t = 0
    samples = generate_continuations(target, random_prompts(4, 7, seed=0), 12, sampling, 0, batch_size=4)
    est = estimate_alpha(target, NeuralDrafter(draft, TINY_VOCAB), samples, TINY_VOCAB, np.random.default_rng(0),
                         lenience=(1.0,), n_boot=50)
    stored = est.confidence_law["past_rejection"]
    weight = sum(s.past_rejection[1].sum() for s in est.scores)
    assert sum(stored["positions"]) == pytest.approx(weight) == pytest.approx(est.n_positions * (1 - est.alpha))
    s, prompt, truth = est.scores[0], list(samples.prompts[0]), samples.continuations[0]
    with torch.inference_mode():
        q = draft(input_ids=torch.tensor([prompt + truth])).logits[0, len(prompt) - 1:-1].softmax(-1)  # [n, V]
        if sampling.greedy:
            wrong = [t for t in range(len(truth)) if int(q[t].argmax()) != truth[t]]
            assert 0 < len(wrong) < len(truth) and s.past_rejection[0].size == len(wrong)
            want = [draft(input_ids=torch.tensor([prompt + truth[:t] + [int(q[t].argmax())]])).logits[0, -1]
                    .softmax(-1).max().item() for t in wrong]
            assert s.past_rejection[0] == pytest.approx(want, abs=1e-5)
    law = confidence_law(est.confidence_law, min_count=1.0)
    assert law.off == pytest.approx(np.asarray(stored["positions"]) / sum(stored["positions"]))
    # the sequence's own token in place of x_t: the teacher-forced confidence at t + 1
    n = len(truth)
    on = NeuralScorer(draft).confidence_after(prompt + truth, [len(prompt) + t for t in range(n - 1)], truth[:-1],
                                               TINY_VOCAB)
    assert on == pytest.approx(s.confidence[1:], abs=1e-5)


def test_the_ngram_scorer_reads_the_context_the_rejected_token_ends(tiny_models) -> None:
    drafter = NgramDrafter(tiny_models[3], VOCAB)
    sequence = [5, 9, 12, 7, 30, 2]
    got = NgramScorer(drafter).confidence_after(sequence, [2, 6], [40, 3], VOCAB)
    model = drafter.model
    want = [model.q(model.state_for([5, 9, 40], drafter.bos)).max(), model.q(model.state_for(sequence + [3],
                                                                                             drafter.bos)).max()]
    assert got == pytest.approx(want, rel=1e-6)
    # the sequence's own token in place of x_t: the teacher-forced confidence at t + 1
    on = NgramScorer(drafter).confidence_after(sequence, range(2, 6), sequence[2:6], VOCAB)
    assert on == pytest.approx(torch.from_numpy(drafter.score_sequence(sequence)).max(-1).values[2:6].numpy(), rel=1e-6)


EDGES = (0.0, 0.25, 0.5, 0.75, 1.0)
CENTRES = np.array([0.125, 0.375, 0.625, 0.875])
W_ON = np.array([0.2, 0.3, 0.3, 0.2])  # the draft's bin on the sequence
A = np.array([0.1, 0.4, 0.7, 0.95])  # P(accepted | bin)
W_OFF = np.array([0.05, 0.1, 0.25, 0.6])  # right after its own rejected token: more confident


class Scored:
    """What the counts read of a `PositionScores`."""

    def __init__(self, confidence, beta, accept, past_rejection) -> None:
        self.confidence, self.beta, self._accept = confidence, beta, accept
        self.past_rejection = past_rejection

    def accept(self) -> np.ndarray:
        return self._accept


@pytest.mark.parametrize("tau,n_max", [(0.25, 6), (0.5, 6), (0.5, 3)])
def test_a_draft_more_confident_past_a_rejection_needs_the_past_rejection_law(tau, n_max) -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    bins = rng.choice(4, size=n, p=W_ON)
    acc = (rng.random(n) < A[bins]).astype(float)
    rejected = np.flatnonzero(acc == 0)
    after = rng.choice(4, size=rejected.size, p=W_OFF)  # what the estimator scores after each rejected draft
    match = np.array([int(np.argmin(np.append(acc[t:t + 8], 0.0))) for t in range(n)])
    scored = Scored(CENTRES[bins], acc, accept_from_match(match, 8), (CENTRES[after], np.ones(rejected.size)))
    d = {"edges": list(EDGES), "positions": [1], "per_position": position_counts([scored], 8, EDGES).to_dict(),
         "past_rejection": past_rejection_counts([scored], EDGES)}
    law, row1 = confidence_law(d), confidence_law({**d, "past_rejection": None})
    assert law.off == pytest.approx(W_OFF, abs=0.02) and row1.off == pytest.approx(W_ON, abs=0.02)
    # decode: on track the sequence's bins and acceptances; past a rejection a fresh draw from W_OFF
    low, drafts, tokens, iterations = CENTRES < tau, 0, 0, 40_000
    for t in rng.integers(0, n - n_max, size=iterations):
        alive, k = True, 0
        while k < n_max:
            b = bins[t + k] if alive else rng.choice(4, p=W_OFF)
            if low[b]:
                break
            alive = alive and bool(acc[t + k])
            tokens += alive
            k += 1
        drafts, tokens = drafts + k, tokens + 1
    good = threshold_prediction(law, [tau], 0, n_max, 0.1)
    bad = threshold_prediction(row1, [tau], 0, n_max, 0.1)
    assert good.expected_drafts[0] == pytest.approx(drafts / iterations, rel=0.02)
    assert good.expected_tokens[0] == pytest.approx(tokens / iterations, rel=0.02)
    assert bad.expected_drafts[0] < drafts / iterations * 0.95  # row 1 prices the drafts past a rejection too low
