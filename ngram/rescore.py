"""Rescoring a top-k "sausage" lattice of draft heads with an n-gram model (Kim et al. 2024,
Sec. 7): the p best paths by dynamic programming over (position, n-gram state), local greedy
rescoring (its Algorithm 2), and the oracle path. Method and measurements: docs/heads.md.

A lattice has H positions with k candidate ids each (ids [H, k], the heads' natural log
probabilities logq [H, k]). A path picks one candidate per position; its score is
sum_i logq[i, j_i] + weight * ln P_ngram(x_i | context, x_<i), the n-gram's natural log
probability from `NgramModel.log_q` (the project's one log10 -> natural-log boundary).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

State = tuple


@dataclass(frozen=True)
class Lattice:
    ids: np.ndarray  # int64 [H, k] candidate target ids per draft position
    logq: np.ndarray  # float64 [H, k] the heads' natural log probabilities of them

    def __post_init__(self) -> None:
        if self.ids.ndim != 2 or self.ids.shape != self.logq.shape or self.ids.size == 0:
            raise ValueError(f"ids and logq must both be [H, k] with H, k >= 1, got {self.ids.shape}, "
                             f"{self.logq.shape}")


class CachedScorer:
    """ln P_ngram(token | state) for a model with `log_q(state)` and `advance(state, token)`,
    one `log_q` call per distinct state."""

    def __init__(self, model) -> None:
        self.model = model
        self.cache: dict[State, np.ndarray] = {}

    def __call__(self, state: State, tokens: np.ndarray) -> np.ndarray:
        if state not in self.cache:
            self.cache[state] = self.model.log_q(state)
        return self.cache[state][tokens].astype(np.float64)

    def advance(self, state: State, token: int) -> State:
        return self.model.advance(state, int(token))


def kbest_paths(lattice: Lattice, scorer: CachedScorer | None, state: State, weight: float, p: int
                ) -> list[tuple[float, list[int]]]:
    """The p highest-scoring paths, best first: [(score, ids)].

    Exact: the n-gram term of position i depends on the path only through its n-gram state, so
    keeping the p best partial paths per (position, state) loses none of the p best paths.
    With no scorer (or weight 0) the score is the heads' alone.
    """
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    use_ngram = scorer is not None and weight != 0.0
    beams: dict[State, list[tuple[float, list[int]]]] = {state if use_ngram else (): [(0.0, [])]}
    for i in range(lattice.ids.shape[0]):
        nxt: dict[State, list[tuple[float, list[int]]]] = {}
        for s, partials in beams.items():
            step = lattice.logq[i] + (weight * scorer(s, lattice.ids[i]) if use_ngram else 0.0)
            for j, token in enumerate(lattice.ids[i]):
                key = scorer.advance(s, token) if use_ngram else ()
                bucket = nxt.setdefault(key, [])
                for score, path in partials:
                    bucket.append((score + float(step[j]), path + [int(token)]))
        beams = {s: heapq.nlargest(p, b, key=lambda e: e[0]) for s, b in nxt.items()}
    return heapq.nlargest(p, (e for b in beams.values() for e in b), key=lambda e: e[0])


def local_rescore(lattice: Lattice, scorer: CachedScorer, state: State, weight: float) -> list[int]:
    """Algorithm 2 of the paper: left to right, the candidate maximising logq + weight * ln P_ngram
    given the choices so far."""
    path = []
    for i in range(lattice.ids.shape[0]):
        j = int(np.argmax(lattice.logq[i] + weight * scorer(state, lattice.ids[i])))
        path.append(int(lattice.ids[i, j]))
        state = scorer.advance(state, path[-1])
    return path


def brute_force_paths(lattice: Lattice, score: Callable[[Sequence[int], Sequence[int]], float], p: int
                      ) -> list[tuple[float, list[int]]]:
    """Every one of the k^H paths scored by score(columns, ids); the p best (for tests)."""
    h, k = lattice.ids.shape
    out = []
    for flat in range(k ** h):
        cols = [(flat // k ** (h - 1 - i)) % k for i in range(h)]
        ids = [int(lattice.ids[i, c]) for i, c in enumerate(cols)]
        out.append((score(cols, ids), ids))
    return heapq.nlargest(p, out, key=lambda e: e[0])


def oracle_accepted(lattice: Lattice, truth: Sequence[int]) -> int:
    """Leading draft positions whose true token is among the k candidates (the oracle path's
    accepted length)."""
    n = 0
    for i, x in enumerate(truth[:lattice.ids.shape[0]]):
        if int(x) not in lattice.ids[i]:
            break
        n += 1
    return n
