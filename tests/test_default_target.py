"""Greedy equivalence on the real default target, SmolLM2-135M-Instruct (slow: loads it)."""
import pytest
import torch

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
