"""Lattice rescoring with real KenLM models (built by lmplz from a synthetic corpus).

- The k-best dynamic programme over (position, n-gram state) returns exactly the p best of all
  k^H paths found by brute-force enumeration (scores and paths), for orders 2-4, k in {2, 3, 4},
  H in {1, 3, 4}, p in {1, 3, 8}, several interpolation weights and random lattices.
- Local rescoring is the left-to-right greedy choice; the oracle counts leading hits.
"""
from __future__ import annotations

import numpy as np
import pytest

from specdec.ngram.model import NgramModel
from specdec.ngram.rescore import (CachedScorer, Lattice, brute_force_paths, kbest_paths, local_rescore,
                                   oracle_accepted)
from tests.ngram_corpus import EOS_ID, SEEN, VOCAB


def random_lattice(rng: np.random.Generator, h: int, k: int) -> Lattice:
    ids = np.stack([rng.choice(SEEN + 20, size=k, replace=False) for _ in range(h)])  # some ids unseen by KenLM
    logq = np.log(rng.dirichlet(np.ones(k), size=h))
    return Lattice(ids.astype(np.int64), logq)


@pytest.mark.parametrize("order", [2, 3, 4])
def test_kbest_equals_brute_force(tiny_models, order) -> None:
    model = NgramModel.load(tiny_models[order], VOCAB, eos_id=EOS_ID)
    rng = np.random.default_rng(order)
    context = [3, 17, 42]
    for h, k in ((1, 4), (3, 3), (4, 2), (3, 4)):
        lattice = random_lattice(rng, h, k)
        for weight in (0.0, 0.5, 2.0):
            def score(cols, ids):
                state, total = model.state_for(context), 0.0
                for i, (c, x) in enumerate(zip(cols, ids)):
                    total += lattice.logq[i, c] + weight * float(model.log_q(state)[x])
                    state = model.advance(state, x)
                return total
            for p in (1, 3, 8):
                got = kbest_paths(lattice, CachedScorer(model), model.state_for(context), weight, p)
                want = brute_force_paths(lattice, score, p)
                np.testing.assert_allclose([g[0] for g in got], [w[0] for w in want], rtol=1e-9, atol=1e-9)
                for total, ids in got:  # each returned path really has its returned score
                    cols = [int(np.nonzero(lattice.ids[i] == x)[0][0]) for i, x in enumerate(ids)]
                    assert score(cols, ids) == pytest.approx(total, abs=1e-9)


def test_local_rescoring_and_oracle(tiny_models) -> None:
    model = NgramModel.load(tiny_models[2], VOCAB, eos_id=EOS_ID)
    lattice = random_lattice(np.random.default_rng(0), 3, 4)
    state = model.state_for([5])
    path = local_rescore(lattice, CachedScorer(model), state, 1.0)
    for i in range(3):
        scores = lattice.logq[i] + model.log_q(state)[lattice.ids[i]]
        assert path[i] == lattice.ids[i, int(np.argmax(scores))]
        state = model.advance(state, path[i])
    assert local_rescore(lattice, CachedScorer(model), state, 0.0) == [int(lattice.ids[i, np.argmax(lattice.logq[i])])
                                                                      for i in range(3)]
    truth = [int(lattice.ids[0, 2]), int(lattice.ids[1, 0]), -1]
    assert oracle_accepted(lattice, truth) == 2 and oracle_accepted(lattice, [-1]) == 0
    with pytest.raises(ValueError):
        Lattice(np.zeros((2, 3), dtype=np.int64), np.zeros((2, 2)))
