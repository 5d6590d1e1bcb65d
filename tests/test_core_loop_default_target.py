"""Greedy equivalence on the real default target, SmolLM2-135M-Instruct (slow: loads it)."""
import pytest
import torch

from specdec.reference.core.seams import Proposal
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer

pytestmark = pytest.mark.slow
GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(scope="module")
def target():
    from specdec.reference.model.models import load_model
    return load_model(None)


def test_greedy_speculative_equals_hf_greedy(target) -> None:
    tok = target.tokenizer
    ids = tok("Rewrite in the past tense: The cat sits on the mat and watches the birds. "
              "The cat sits on the mat")["input_ids"]
    x = torch.tensor([ids])
    hf = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=40, do_sample=False,
                               eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
    scorer = TargetScorer(target.model)
    ours = autoregressive_decode(scorer, ids, 40, GREEDY, None, tok.eos_token_id).tokens
    assert ours == hf
    for gamma in (2, 5):
        spec = speculative_decode(scorer, PromptLookupDrafter(3), ids, 40, gamma, GREEDY, None, tok.eos_token_id)
        assert spec.tokens == hf, gamma


def test_fast_backend_equals_eager_on_the_default_target(target) -> None:
    """The fast backend on SmolLM2-135M: logits within 1e-4 max|eager| + 1e-5 for passes of
    1..16 tokens after a 60-token prefix, and the same greedy text (40 tokens, gamma 1..5)."""
    from specdec.reference.model.backend import available, use_backend
    from specdec.reference.model.models import load_model

    fast = load_model(None)
    if available(fast.model) is not None:
        pytest.skip(available(fast.model))
    assert use_backend(fast.model, "fast") == "fast"
    tok = target.tokenizer
    ids = tok("It is a truth universally acknowledged, that a single man in possession of a good fortune, "
              "must be in want of a wife. However little known the feelings or views of such a man may be "
              "on his first entering a neighbourhood, this truth is so well fixed")["input_ids"]
    x = torch.tensor([ids])
    with torch.inference_mode():
        for k in (1, 2, 4, 8, 16):
            eager_logits = target.model(input_ids=x[:, :len(ids) - 16 + k]).logits[0, -k:]
            a, b = TargetScorer(target.model), TargetScorer(fast.model)
            a.start(ids[:len(ids) - 16 + 1])
            b.start(ids[:len(ids) - 16 + 1])
            draft = ids[len(ids) - 16 + 1:len(ids) - 16 + k]
            la, lb = (s.score(Proposal(torch.tensor(draft, dtype=torch.long))).logits for s in (a, b))
            assert (la - eager_logits).abs().max() <= 1e-4 * eager_logits.abs().max() + 1e-5
            assert (lb - la).abs().max() <= 1e-4 * la.abs().max() + 1e-5, k
    reference = autoregressive_decode(TargetScorer(target.model), ids, 40, GREEDY, None).tokens
    assert autoregressive_decode(TargetScorer(fast.model), ids, 40, GREEDY, None).tokens == reference
    for gamma in (1, 3, 5):
        spec = speculative_decode(TargetScorer(fast.model), PromptLookupDrafter(3), ids, 40, gamma, GREEDY, None)
        assert spec.tokens == reference, gamma


def test_ragged_batch_rows_equal_their_prompts_decoded_alone(target) -> None:
    """Six prompts of different lengths decoded four at a time (continuous batching, prompt lookup
    gamma 3: the rows accept different counts in the same pass), greedy: each equals its decode alone."""
    from specdec.reference.core.batch_loop import decode_batch
    from specdec.reference.model.batch_scorer import BatchScorer

    tok = target.tokenizer
    texts = ["The cat sits on the mat. The cat sits on the mat and watches",
             "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n", "Once upon a time",
             "It is a truth universally acknowledged, that a single man in possession of a good fortune",
             "1, 2, 3, 4, 5, 6,", "Summarize: the meeting moved to Tuesday. Summary:"]
    prompts = [tok(t)["input_ids"] for t in texts]
    alone = [autoregressive_decode(TargetScorer(target.model), p, 24, GREEDY, None).tokens for p in prompts]
    for layout in ("padded", "packed"):
        run = decode_batch(BatchScorer(target.model, 4, 64, layout), PromptLookupDrafter(3), prompts, 24, 3, GREEDY,
                           None)
        assert dict(run.outputs) == dict(enumerate(alone)), layout
        assert (run.joint.sum(axis=0) > 0).sum() > 1  # ragged: different accepted counts


def test_ragged_batch_sampling_follows_the_target(target) -> None:
    """Sampled rows (temperature 1, top-k 3) in a batch of 8 with prompt lookup: the joint of the
    first two tokens over 800 requests against the exact joint from the target's own logits
    (9 cells), Pearson chi-square at significance 1e-3, fixed seed."""
    import numpy as np

    from specdec.reference.core.batch_loop import decode_batch
    from specdec.reference.model.batch_scorer import BatchScorer
    from tests.stats_helpers import chi_square_pvalue

    sampling = SamplingConfig(1.0, top_k=3)
    prompt = target.tokenizer("one two three one two three one two three one two")["input_ids"]
    with torch.inference_mode():
        p1 = sampling.probs(target.model(input_ids=torch.tensor([prompt])).logits[0, -1]).double()
        first = p1.nonzero()[:, 0].tolist()
        seconds = {x: sampling.probs(target.model(input_ids=torch.tensor([prompt + [x]])).logits[0, -1]).double()
                   for x in first}
    cells = {(a, b): float(p1[a] * seconds[a][b]) for a in first for b in seconds[a].nonzero()[:, 0].tolist()}
    run = decode_batch(BatchScorer(target.model, 8, len(prompt) + 8), PromptLookupDrafter(3), [prompt] * 800, 2, 1,
                       sampling, 7)
    assert run.stats.kept() > 100  # drafts were accepted: the rows really were ragged
    counts = {cell: 0 for cell in cells}
    for _, tokens in run.outputs:
        counts[tuple(tokens)] = counts.get(tuple(tokens), 0) + 1
    assert set(counts) == set(cells)  # nothing outside the target's support
    keys = sorted(cells)
    assert chi_square_pvalue(np.array([counts[c] for c in keys]), np.array([cells[c] for c in keys])) > 1e-3
