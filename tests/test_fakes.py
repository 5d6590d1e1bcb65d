"""The tests' own fakes behave as their docstrings say (tests/fakes.py, tests/ngram_corpus.py)."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.fakes import ConstantLM, word_tokenizer
from tests.ngram_corpus import SEEN, synthetic_corpus


def test_constant_lm_is_context_free() -> None:
    lm = ConstantLM([0.0, 1.0, 2.0])
    a = lm(input_ids=torch.tensor([[0, 1, 2]])).logits
    b = lm(input_ids=torch.tensor([[2, 2, 2]]), logits_to_keep=1).logits
    assert torch.equal(a[0, -1], b[0, 0])


def test_word_tokenizer_round_trip(tmp_path: Path) -> None:
    tok = word_tokenizer()
    ids = tok("w1 w5 w60", add_special_tokens=False)["input_ids"]
    assert ids == [1, 5, 60]


def test_synthetic_corpus_is_deterministic(tmp_path) -> None:
    a = synthetic_corpus(tmp_path / "a.txt").read_text()
    b = synthetic_corpus(tmp_path / "b.txt").read_text()
    assert a == b
    ids = {int(t) for t in a.split()}
    assert max(ids) < SEEN and len(ids) > SEEN // 2
