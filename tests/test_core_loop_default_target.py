"""Greedy equivalence on the real default target, SmolLM2-135M-Instruct (slow: loads it)."""
import pytest
import torch

from specdec.reference.core.seams import Proposal
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.target import TargetScorer

pytestmark = pytest.mark.slow
GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(scope="module")
def target():
    from specdec.reference.core.models import load_model
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
    from specdec.reference.core.backend import available, use_backend
    from specdec.reference.core.models import load_model

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
