"""The one prompt type (`TokenPrompt`: ids and an optional encoder source) and the one model
adapter below the scorer seam (`ModelPass`): nothing above the seam asks which kind a model is."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from specdec.reference.core.prompt import TokenPrompt, as_prompt, source_ids, with_ids
from specdec.reference.model.seq2seq import ModelPass, encode, run_model
from tests.tiny_models import tiny_llama
from tests.tiny_seq2seq import prompt_for, tiny_t5

ROOT = Path(__file__).resolve().parents[1]


def test_appending_or_slicing_keeps_the_source() -> None:
    source = {"input_ids": torch.tensor([5, 6, 7])}
    prompt = TokenPrompt([0], source)
    longer = prompt + [3, 4]
    assert isinstance(longer, TokenPrompt) and list(longer) == [0, 3, 4] and longer.source is source
    assert longer[1] == 3 and longer[-1] == 4 and len(longer) == 3
    assert longer[:2].source is source and list(longer[:2]) == [0, 3]
    assert with_ids(longer, [9]).source is source and source_ids(longer) == [5, 6, 7]
    assert as_prompt(longer) is longer and list(prompt) == [0]  # read-only: appending made a new prompt
    with pytest.raises(TypeError):
        [1] + prompt  # a list in front of a prompt would lose the source: refused, not dropped
    plain = [1, 2]
    assert with_ids(plain, (3,)) == [3] and source_ids(plain) == [] and as_prompt(plain) == plain
    assert as_prompt(plain) is not plain
    assert TokenPrompt([1, 2]).source is None and source_ids(TokenPrompt([1, 2])) == []


def test_a_prompt_needs_a_nonempty_source_when_it_has_one() -> None:
    from specdec.errors import SpecdecError

    with pytest.raises(SpecdecError, match="encoder's input"):
        TokenPrompt([0], {})


@torch.inference_mode()
def test_the_model_pass_is_the_plain_forward_of_either_kind() -> None:
    llama = tiny_llama(vocab_size=16, seed=1)
    ids = torch.tensor([[1, 2, 3, 4]])
    bound = ModelPass(llama, [[1, 2, 3, 4]])
    assert bound.encoder is None
    assert torch.equal(bound(ids, 2).logits, llama(input_ids=ids, logits_to_keep=2).logits)
    t5 = tiny_t5(vocab_size=16, seed=0)
    prompt = prompt_for(t5) + [3, 4]
    bound = ModelPass(t5, [prompt])
    assert bound.encoder is not None
    decoder_ids = torch.tensor([list(prompt)])
    assert torch.equal(bound(decoder_ids, 2).logits, run_model(t5, decoder_ids, encode(t5, [prompt]), 2).logits)


# above the scorer seam: the CLI, the loop and its rules, drafters (their factory aside: it checks
# the pair's kinds), the estimator, the measurement harness, BiLD and the validation
ABOVE_THE_SEAM = ["specdec/cli", "reference/estimate", "reference/measure", "reference/bild", "reference/validation",
                  "reference/drafters", "reference/core/loop.py", "reference/core/step.py", "reference/core/rules.py",
                  "reference/core/verifier.py", "reference/core/stats.py", "reference/core/policy.py",
                  "reference/model/target.py", "reference/core/batch_loop.py"]
MODEL_KIND = re.compile(r"\b(encoder_state|EncoderState|run_model|is_encoder_decoder|folder_is_encoder_decoder|"
                        r"Seq2SeqPrompt)\b")


def test_nobody_above_the_scorer_seam_asks_the_model_kind() -> None:
    found = []
    for place in ABOVE_THE_SEAM:
        path = ROOT / place
        for module in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if module.name == "factory.py":
                continue
            for number, line in enumerate(module.read_text().splitlines(), 1):
                if MODEL_KIND.search(line):
                    found.append(f"{module.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
