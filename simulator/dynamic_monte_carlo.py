"""Monte Carlo of the draft-length rules `specdec.simulator.dynamic` prices in closed form (the
tests check each closed form against it): `simulate_rule` runs any rule given as (look, draft)
callables over a `ConfidenceLaw` (bins on track from the position's row, past a rejection from
the law's `off`); `threshold_rule` and `break_even_rule` are the rules. Pure numpy; names as
in `specdec.simulator.dynamic`."""
from __future__ import annotations

from typing import Callable

import numpy as np
import numpy.typing as npt

from specdec.simulator.checks import FloatArray
from specdec.simulator.dynamic import ConfidenceLaw, RulePrediction, draft_curve, verify_curve


def simulate_rule(law: ConfidenceLaw, look: Callable[[int, float], bool], draft: Callable[[int, float, int], str],
                  c: float | npt.ArrayLike, n_max: int, verify_cost: npt.ArrayLike | None, iterations: int,
                  rng: np.random.Generator) -> RulePrediction:
    """Monte Carlo of a stopping rule over `iterations` iterations. With i drafted so far (rho =
    prod a over their bins): look(i + 1, rho) decides whether to look at position i + 1 (a
    forward, c); its bin b ~ w_{i+1} on track, ~ off past a rejection; draft(i + 1, rho, b)
    answers "draft", "draft_stop" (draft it, then stop: transformers' threshold) or "stop". Each drafted token is accepted with a(b) while
    all before it were; the iteration yields the accepted prefix + 1 tokens and takes c_F per look
    when it looks F times (`draft_curve`: c per look for a number) plus v(L + 1)."""
    w, a = law.rows(n_max)
    v = verify_curve(verify_cost, n_max)
    per_look = np.concatenate([[0.0], draft_curve(c, n_max)])  # c_F, F = 0..n_max
    cum, cum_off = np.cumsum(w, axis=1), np.cumsum(law.off)
    tokens = drafts = forwards = time = 0.0
    for _ in range(iterations):
        rho, n, alive, looks = 1.0, 0, True, 0
        while n < n_max and look(n + 1, rho):
            looks += 1
            b = min(int(np.searchsorted(cum[n] if alive else cum_off, rng.random(), side="right")), w.shape[1] - 1)
            verdict = draft(n + 1, rho, b)
            if verdict == "stop":
                break
            alive = alive and rng.random() < a[n, b]
            tokens += alive
            rho *= a[n, b]
            n += 1
            if verdict == "draft_stop":
                break
        tokens += 1
        drafts += n
        forwards += looks
        time += per_look[looks] * looks + v[n]
    k = float(iterations)
    return RulePrediction(np.array([tokens / k]), np.array([drafts / k]), np.array([forwards / k]),
                          np.array([time / k]), np.array([tokens / time]))


def threshold_rule(law: ConfidenceLaw, tau: float, n_min: int, keep_last: bool = False
                   ) -> tuple[Callable[[int, float], bool], Callable[[int, float, int], str]]:
    """(look, draft) of the confidence threshold, for `simulate_rule`."""
    low = law.edges[:-1] < tau - 1e-12  # bins below tau

    def draft(i: int, rho: float, b: int) -> str:
        if i <= n_min or not low[b]:
            return "draft"
        return "draft_stop" if keep_last else "stop"

    return (lambda i, rho: True), draft


def break_even_rule(law: ConfidenceLaw, v: FloatArray, c: float, rate: float, n_max: int
                    ) -> tuple[Callable[[int, float], bool], Callable[[int, float, int], str]]:
    """(look(i, rho), draft(i, rho, b)) of the break-even rule at `rate`, for `simulate_rule`."""
    w, a = law.rows(n_max)
    v = verify_curve(v, n_max)

    def look(i: int, rho: float) -> bool:
        dv = v[i] - v[i - 1]
        return float((w[i - 1] * np.maximum(0.0, rho * a[i - 1] - rate * dv)).sum()) >= rate * c

    def draft(i: int, rho: float, b: int) -> str:
        return "draft" if rho * a[i - 1, b] >= rate * (v[i] - v[i - 1]) else "stop"

    return look, draft
