"""Shared fixtures for the n-gram tests: a tiny synthetic token-id corpus and the models
lmplz builds from it (orders 1 to 5, fake vocabulary of 500 ids of which 400 occur).

Import the fixtures into a test module to use them (`from tests.test_ngram_fixtures import ...`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specdec.ngram.build import build_model
from specdec.ngram.tools import find_tool

VOCAB = 500      # fake target vocabulary: ids 0..499
SEEN = 400       # the corpus uses ids 0..399 only; 400..499 are <unk> to KenLM
EOS_ID = 499     # the fake target's EOS (never in the corpus)


def synthetic_corpus(path: Path, seen: int = SEEN, lines: int = 300, seed: int = 0) -> Path:
    """A deterministic Markov-chain corpus over ids [0, seen): peaked transitions, so
    higher-order contexts recur and every order has explicit n-grams and back-offs."""
    rng = np.random.default_rng(seed)
    trans = rng.dirichlet(np.full(seen, 0.05), size=seen)  # [seen, seen]
    with open(path, "w") as f:
        for _ in range(lines):
            t = int(rng.integers(seen))
            toks = []
            for _ in range(int(rng.integers(5, 60))):
                toks.append(t)
                t = int(rng.choice(seen, p=trans[t]))
            f.write(" ".join(map(str, toks)) + "\n")
    return path


def require_kenlm_tools() -> None:
    try:
        find_tool("lmplz")
        find_tool("build_binary")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    return synthetic_corpus(tmp_path_factory.mktemp("ngram-corpus") / "train.txt")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, corpus_file) -> dict[int, Path]:
    """order -> model folder, built end to end through the real lmplz and build_binary."""
    require_kenlm_tools()
    root = tmp_path_factory.mktemp("ngram-models")
    return {order: Path(build_model(corpus_file, order, root / f"o{order}", VOCAB, eos_id=EOS_ID,
                                    memory="200M").out)
            for order in range(1, 6)}


def test_synthetic_corpus_is_deterministic(tmp_path) -> None:
    a = synthetic_corpus(tmp_path / "a.txt").read_text()
    b = synthetic_corpus(tmp_path / "b.txt").read_text()
    assert a == b
    ids = {int(t) for t in a.split()}
    assert max(ids) < SEEN and len(ids) > SEEN // 2
