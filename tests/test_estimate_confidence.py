"""The estimator's joint law of draft confidence and acceptance (issue 52): counts per bin by
hand; on a tiny pair the stored confidence is the draft's unadjusted top probability, the law's
mean acceptance is alpha, and its fixed-gamma prediction is the i.i.d. formula."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.estimate.alpha import estimate_alpha
from specdec.reference.estimate.confidence import ConfidenceCounts
from specdec.reference.estimate.samples import generate_continuations
from specdec.reference.estimate.teacher_forced import continuation_logits
from specdec.simulator.closed_forms import expected_tokens
from specdec.simulator.dynamic import threshold_prediction
from tests.fakes import TINY_VOCAB, random_prompts
from tests.tiny_models import tiny_llama


def test_counts_per_bin_by_hand() -> None:
    counts = ConfidenceCounts.of([0.05, 0.15, 0.97, 1.0, 0.99], [0.0, 1.0, 1.0, 0.5, 0.25], (0.0, 0.1, 0.5, 0.99, 1.0))
    assert counts.positions == (1, 1, 1, 2)  # 0.99 and 1.0 fall in the last bin
    assert counts.accepted == (0.0, 1.0, 1.0, 0.75)
    out = counts.to_dict()
    assert out["weight"] == pytest.approx([0.2, 0.2, 0.2, 0.4]) and out["accept"] == pytest.approx([0, 1, 1, 0.375])
    law = counts.law()
    assert law.weights.shape == (1, 4) and law.accept[0] == pytest.approx([0, 1, 1, 0.375])


@pytest.mark.parametrize("sampling", [SamplingConfig(0.0), SamplingConfig(1.0)], ids=["greedy", "t1"])
def test_the_law_of_a_tiny_pair(sampling: SamplingConfig) -> None:
    target, draft = tiny_llama(TINY_VOCAB, seed=0, sharpness=4.0), tiny_llama(TINY_VOCAB, seed=1, sharpness=4.0)
    samples = generate_continuations(target, random_prompts(6, 7, seed=0), 20, sampling, 0, batch_size=4)
    est = estimate_alpha(target, NeuralDrafter(draft, TINY_VOCAB), samples, TINY_VOCAB, np.random.default_rng(0),
                         lenience=(1.0,), n_boot=50)
    law = est.confidence_law
    assert law is not None and sum(law["positions"]) == est.n_positions == 120
    with torch.inference_mode():
        logits = continuation_logits(draft, samples, range(6))
    expected = torch.cat([x.float().softmax(-1).max(-1).values for x in logits]).double().numpy()
    got = np.concatenate([s.confidence for s in est.scores])
    assert got == pytest.approx(expected, abs=1e-6)
    mean = sum(a * n for a, n in zip(law["accept"], law["positions"]) if a is not None) / sum(law["positions"])
    assert mean == pytest.approx(est.alpha, abs=1e-9)
    ci = [c for c in law["accept_ci"] if c is not None]
    assert all(0 <= lo <= hi <= 1 for lo, hi in ci)
    counts = ConfidenceCounts(tuple(law["edges"]), tuple(law["positions"]), tuple(law["accepted"]),
                              tuple(law["accepted_sq"]))
    fixed = threshold_prediction(counts.law(), [0.0], 3, 3, 0.0)
    assert fixed.expected_tokens[0] == pytest.approx(expected_tokens(est.alpha, 3))
    # per draft position: row 1 is the pooled law; row i counts the starts whose drafts 1..i-1 were accepted
    rows = law["per_position"]
    assert rows["positions"][0] == pytest.approx(law["positions"]) and rows["accepted"][0] == pytest.approx(law["accepted"])
    for i in range(1, len(rows["positions"])):
        reached = sum(np.prod(s.accept()[:i, :s.beta.size - i], axis=0).sum() for s in est.scores)
        assert sum(rows["positions"][i]) == pytest.approx(reached)
    if sampling.temperature == 0:  # 0/1 weights: whole counts, accepted ones among them
        assert np.allclose(rows["positions"], np.round(rows["positions"]))


def test_a_top_k_confidence_is_the_top_probability_renormalised_over_the_top_k() -> None:
    """What llama.cpp's --spec-draft-p-min reads (its draft sampler keeps the top 10): the same
    positions and acceptance, only the confidence renormalised, by hand; a scorer without a
    confidence is refused."""
    from specdec.errors import SpecdecError
    from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
    from specdec.reference.estimate.shares import score_chunks
    from specdec.reference.estimate.teacher_forced import top_confidence

    assert top_confidence(torch.tensor([[0.5, 0.3, 0.2]]), 2).tolist() == pytest.approx([0.625])
    assert top_confidence(torch.tensor([[0.5, 0.3, 0.2]])).tolist() == pytest.approx([0.5])
    target, draft = tiny_llama(TINY_VOCAB, seed=0, sharpness=4.0), tiny_llama(TINY_VOCAB, seed=1, sharpness=4.0)
    prompts = random_prompts(4, 7, seed=0)
    args = (target, {"d": NeuralDrafter(draft, TINY_VOCAB)}, prompts, [range(4)], 12, SamplingConfig(0.0), 0,
            TINY_VOCAB, (1.0,), 4, 4)
    full, top3 = score_chunks(*args), score_chunks(*args, confidence_top_k=3)
    with torch.inference_mode():
        logits = continuation_logits(draft, full.samples, range(4))
    by_hand = torch.cat([(lambda t: t[:, 0] / t.sum(-1))(x.float().softmax(-1).topk(3, -1).values)
                         for x in logits]).double().numpy()
    got = np.concatenate([s.confidence for s in top3.scores["d"]])
    assert got == pytest.approx(by_hand, abs=1e-6)
    assert np.all(got >= np.concatenate([s.confidence for s in full.scores["d"]]) - 1e-9)
    assert all(np.array_equal(a.beta, b.beta) for a, b in zip(full.scores["d"], top3.scores["d"]))
    with pytest.raises(SpecdecError, match="no confidence"):
        score_chunks(target, {"l": PromptLookupDrafter()}, prompts, [range(4)], 12, SamplingConfig(0.0), 0,
                     TINY_VOCAB, (1.0,), 4, 4, confidence_top_k=3)
