"""The n-gram tests' synthetic data: a tiny token-id corpus over a fake vocabulary of 500 ids
of which 400 occur (the fixtures `corpus_file` and `tiny_models`, the models lmplz builds from
it for orders 1 to 5, are in conftest.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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
