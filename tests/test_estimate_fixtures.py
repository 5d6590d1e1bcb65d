"""Shared fixtures for the estimator and validation tests: hand-built models and drafters,
and a tiny saved target/draft pair with a word-level tokenizer for the CLI tests.

Import what you need into a test module (`from tests.test_estimate_fixtures import ...`).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import numpy as np
import pytest
import torch
from transformers import LlamaConfig

from specdec.reference.core.seams import Proposal
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.core.sampling import SamplingConfig
from tests.tiny_models import tiny_llama

TINY_VOCAB = 64


class ConstantLM(torch.nn.Module):
    """A 'causal LM' whose logits are the same vector at every position (no cache needed).

    It accepts the keyword arguments our code passes to Hugging Face models and ignores the
    context, so p (or q) is known exactly: softmax(logits) adjusted by the sampling.
    """

    def __init__(self, logits: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("vector", torch.tensor(list(logits), dtype=torch.float32))
        self.config = LlamaConfig(vocab_size=len(logits), hidden_size=8, intermediate_size=8,
                                  num_hidden_layers=1, num_attention_heads=1)

    @property
    def device(self) -> torch.device:
        return self.vector.device

    def get_output_embeddings(self):
        return SimpleNamespace(weight=torch.empty(self.vector.shape[0], 1))

    def forward(self, input_ids: torch.Tensor, logits_to_keep: int = 0, **_) -> SimpleNamespace:
        b, n = input_ids.shape
        keep = n if not logits_to_keep else logits_to_keep
        return SimpleNamespace(logits=self.vector.expand(b, keep, -1).clone())


class MaskedLM(torch.nn.Module):
    """A real (tiny) causal LM whose logits are -inf outside `allowed` token ids."""

    def __init__(self, inner: torch.nn.Module, allowed: Sequence[int]) -> None:
        super().__init__()
        self.inner = inner
        mask = torch.zeros(inner.config.vocab_size, dtype=torch.bool)
        mask[list(allowed)] = True
        self.register_buffer("allowed", mask)
        self.config = inner.config

    @property
    def device(self) -> torch.device:
        return self.inner.device

    def get_output_embeddings(self):
        return self.inner.get_output_embeddings()

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        out.logits = out.logits.masked_fill(~self.allowed, float("-inf"))
        return out


class FixedTokenDrafter(DrafterBase):
    """Deterministic drafter: always proposes `token` repeated, except (optionally) at every
    `skip_every`-th committed length, where it proposes nothing."""

    deterministic = True

    def __init__(self, token: int, skip_every: int = 0) -> None:
        self.token = token
        self.skip_every = skip_every
        self.length = 0

    def start(self, prompt: Sequence[int], prefill=None) -> None:
        self.length = len(prompt)

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                min_confidence: float = 0.0) -> Proposal:
        if self.skip_every and self.length % self.skip_every == 0:
            return Proposal(torch.empty(0, dtype=torch.long))
        return Proposal(torch.full((gamma,), self.token, dtype=torch.long))

    def commit(self, verdict, scored) -> None:
        self.length += len(verdict.tokens)


def word_tokenizer(vocab_size: int = TINY_VOCAB):
    """A word-level fast tokenizer: words w0..w{V-3}, [UNK], </s> (ids 0..V-1)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(vocab_size - 2)}
    vocab["[UNK]"] = vocab_size - 2
    vocab["</s>"] = vocab_size - 1
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="</s>")


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory) -> SimpleNamespace:
    """Saved tiny Llama target and draft (same word-level tokenizer) and a prompts file."""
    root = tmp_path_factory.mktemp("tiny-pair")
    tokenizer = word_tokenizer()
    paths = {}
    for name, seed in (("target", 0), ("draft", 1)):
        model = tiny_llama(TINY_VOCAB, seed, sharpness=8.0)
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        paths[name] = root / name
    prompts = root / "prompts.txt"
    prompts.write_text("\n".join(" ".join(f"w{(7 * i + 3 * j) % 60}" for j in range(10)) for i in range(12)) + "\n")
    return SimpleNamespace(target=paths["target"], draft=paths["draft"], prompts=prompts, root=root)


def random_prompts(n: int, length: int, vocab: int = TINY_VOCAB, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (length,), generator=g).tolist() for _ in range(n)]


def test_constant_lm_is_context_free() -> None:
    lm = ConstantLM([0.0, 1.0, 2.0])
    a = lm(input_ids=torch.tensor([[0, 1, 2]])).logits
    b = lm(input_ids=torch.tensor([[2, 2, 2]]), logits_to_keep=1).logits
    assert torch.equal(a[0, -1], b[0, 0])


def test_word_tokenizer_round_trip(tmp_path: Path) -> None:
    tok = word_tokenizer()
    ids = tok("w1 w5 w60", add_special_tokens=False)["input_ids"]
    assert ids == [1, 5, 60]


def assert_same_scores(fast, slow, greedy: bool, atol: float) -> None:
    """Two teacher-forced scorings of the same samples agree position by position."""
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_allclose(a.beta, b.beta, atol=atol)
        np.testing.assert_allclose(a.beta_lenient, b.beta_lenient, atol=atol)
        if greedy:
            np.testing.assert_array_equal(a.match, b.match)
