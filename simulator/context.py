"""Target pass times as a function of the context length: t(k, L), timed at a few KV-cache
lengths L (`specdec estimate` times the shortest prompt, the category's context and the longest
prompt plus its new tokens) and interpolated linearly in L between two timed lengths — a pass
reads every weight once whatever L, and each layer's attention reads L cached keys and values,
so at a fixed k the time is close to affine in L. Never extrapolated: a length outside the
timed ones is refused. How well the interpolation predicts an untimed length is measured by
`benchmarks/bench_context.py` (benchmarks/RESULTS.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from specdec.errors import SpecdecError
from specdec.simulator.checks import check_verify_cost


@dataclass(frozen=True)
class ContextTimes:
    """contexts: increasing KV-cache lengths; seconds[i][k - 1]: t(k) at contexts[i], k = 1..K."""

    contexts: tuple[int, ...]
    seconds: tuple[tuple[float, ...], ...]

    @property
    def max_k(self) -> int:
        return len(self.seconds[0])

    def bracket(self, context: int) -> tuple[int, int]:
        """The two timed lengths around `context` (equal when it was timed).

        Raises:
            SpecdecError: context outside the timed range.
        """
        lo, hi = self.contexts[0], self.contexts[-1]
        if not lo <= context <= hi:
            raise SpecdecError(f"context {context} is outside the timed contexts {lo}..{hi} (never extrapolated: "
                               f"time it with `specdec estimate --contexts {context}`)")
        i = int(np.searchsorted(self.contexts, context))
        return (self.contexts[i], self.contexts[i]) if self.contexts[i] == context else \
            (self.contexts[i - 1], self.contexts[i])

    def at(self, context: int) -> tuple[float, ...]:
        """t(1..K) at `context` tokens, interpolated linearly between the two timed lengths around it."""
        self.bracket(context)
        table = np.asarray(self.seconds)
        return tuple(float(np.interp(context, self.contexts, table[:, k])) for k in range(self.max_k))

    def verify_cost_at(self, context: int) -> tuple[float, ...]:
        """v(1..K) = t(k) / t(1) at `context` tokens."""
        t = self.at(context)
        return tuple(x / t[0] for x in t)


def check_context_times(contexts: Sequence[int], seconds: Sequence[Sequence[float]]) -> ContextTimes:
    """A ContextTimes from raw values, checked: increasing positive integer lengths, one curve
    t(1..K) of positive finite seconds per length (the shortest K of all kept), each a valid
    verify-cost curve once divided by its t(1).

    Raises:
        SpecdecError: what is wrong, in one line.
    """
    if not isinstance(contexts, (list, tuple)) or not isinstance(seconds, (list, tuple)) or not contexts \
            or len(contexts) != len(seconds):
        raise SpecdecError("context times need one list of seconds t(1..K) per context length")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in contexts):
        raise SpecdecError(f"context lengths must be integers >= 1, got {list(contexts)}")
    if any(b <= a for a, b in zip(contexts, contexts[1:])):
        raise SpecdecError(f"context lengths must increase, got {list(contexts)}")
    curves = []
    for n, row in zip(contexts, seconds):
        ok = isinstance(row, (list, tuple)) and row and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x) and x > 0 for x in row)
        if not ok:
            raise SpecdecError(f"the times at context {n} must be positive finite seconds t(1), ..., t(K)")
        try:
            check_verify_cost([x / row[0] for x in row])
        except SpecdecError as exc:
            raise SpecdecError(f"the times at context {n}: {exc}") from None
        curves.append(tuple(float(x) for x in row))
    k = min(len(c) for c in curves)
    return ContextTimes(tuple(contexts), tuple(c[:k] for c in curves))


def merge_context_times(parts: Sequence[ContextTimes]) -> ContextTimes:
    """One table from several (e.g. each category's timings of the same target on the same
    machine): every timed length, a length timed twice averaged, K the shortest of all."""
    if not parts:
        raise SpecdecError("no context times to merge")
    k = min(p.max_k for p in parts)
    by_length: dict[int, list[tuple[float, ...]]] = {}
    for part in parts:
        for n, row in zip(part.contexts, part.seconds):
            by_length.setdefault(n, []).append(row[:k])
    lengths = sorted(by_length)
    return ContextTimes(tuple(lengths), tuple(tuple(np.mean(by_length[n], axis=0).tolist()) for n in lengths))
