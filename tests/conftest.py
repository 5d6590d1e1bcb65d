"""Shared pytest set-up and fixtures: torch threads, the n-gram tests' corpus and models
(`corpus_file`, `tiny_models`), and a saved tiny target/draft pair for the CLI tests
(`tiny_pair`).

Tiny-model tests run torch on one thread: their matrices are so small that intra-op
threading only adds overhead (measured 16 ms vs 0.6 ms per tiny forward pass on a busy
2-core machine). Tests marked slow (real SmolLM2 model) keep torch's default threads.
"""
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.ngram_corpus import EOS_ID, VOCAB, require_kenlm_tools, synthetic_corpus

# Saving a tiny model must not print progress bars into the stderr a CLI test reads.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture(autouse=True)
def _torch_threads(request):
    try:
        import torch
    except ImportError:  # the simulator tests do not need torch
        yield
        return
    before = torch.get_num_threads()
    if request.node.get_closest_marker("slow") is None:
        torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    return synthetic_corpus(tmp_path_factory.mktemp("ngram-corpus") / "train.txt")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, corpus_file) -> dict[int, Path]:
    """order -> model folder, built end to end through the real lmplz and build_binary."""
    require_kenlm_tools()
    root = tmp_path_factory.mktemp("ngram-models")
    from specdec.ngram.build import build_model

    return {order: Path(build_model(corpus_file, order, root / f"o{order}", VOCAB, eos_id=EOS_ID,
                                    memory="200M").out)
            for order in range(1, 6)}


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory) -> SimpleNamespace:
    """Saved tiny Llama target and draft (same word-level tokenizer) and a prompts file."""
    from tests.fakes import TINY_VOCAB, word_tokenizer  # torch: imported only by the tests that use it
    from tests.tiny_models import tiny_llama

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
