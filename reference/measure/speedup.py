"""The one definition of a measured speedup, and `compare`, the harness for one method:

    speedup = (baseline decode seconds / baseline tokens) / (method decode seconds / method tokens),

decode seconds with the separate prefill excluded (reported beside it), summed over paired
runs (the same prompts and repeats, interleaved by `specdec.reference.measure.harness.measure`);
its 95% interval by a bootstrap over the run pairs. Repeats are pooled as they come; a caller
that keeps each prompt's fastest repeat instead (BiLD's sweep: other jobs only ever slow a run
down) reduces its runs with `harness.fastest` first, and the definition is the same. Every
command and benchmark that reports a measured speedup calls `speedup` (docs/validation.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.scorer import Scorer
from specdec.reference.measure.bootstrap import bootstrap_ci
from specdec.reference.measure.harness import Method, Run, baseline as plain, measure

CLOCKS = ("wall", "cpu")


@dataclass(frozen=True)
class Comparison:
    """A method against the baseline on the same runs.

    speedup: see the module doc; ci: its 95% bootstrap interval over run pairs; per_run: the
    same ratio for each pair; corrected: the speedup with each run's time in target steps of
    its moment (probed before and after it: removes the machine's speed drift), None without
    probes; prefill_seconds: mean separate prefill per run (baseline, method), excluded above;
    seconds / tokens: (baseline, method) totals; clock: "wall" or "cpu" (this process's CPU time);
    steps: (baseline, method) totals in target steps of each run's moment (wall seconds / its probe),
    None without probes.
    """

    speedup: float
    ci: tuple[float, float]
    per_run: list[float]
    corrected: float | None
    prefill_seconds: tuple[float, float]
    seconds: tuple[float, float]
    tokens: tuple[int, int]
    clock: str = "wall"
    steps: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"speedup": self.speedup, "ci": list(self.ci), "per_run": self.per_run, "corrected": self.corrected,
                "prefill_seconds": list(self.prefill_seconds), "seconds": list(self.seconds),
                "tokens": list(self.tokens), "clock": self.clock,
                "steps": None if self.steps is None else list(self.steps)}


def speedup(baseline: Sequence[Run], runs: Sequence[Run], rng: np.random.Generator | None = None,
            n_boot: int = 2000, clock: str = "wall") -> Comparison:
    """The measured speedup of `runs` over `baseline`, paired by position (see the module doc)."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, got {clock!r}")
    if len(baseline) != len(runs) or not runs:
        raise ValueError(f"need the same number (> 0) of baseline and method runs, got {len(baseline)} and {len(runs)}")
    rng = rng if rng is not None else np.random.default_rng(0)
    base, mine = _seconds(baseline, clock), _seconds(runs, clock)  # [n]
    base_tok = np.array([r.tokens for r in baseline], dtype=np.float64)
    mine_tok = np.array([r.tokens for r in runs], dtype=np.float64)
    value = float((base.sum() / base_tok.sum()) / (mine.sum() / mine_tok.sum()))
    ci = bootstrap_ci(lambda w: ((w @ base) / (w @ base_tok)) / ((w @ mine) / (w @ mine_tok)), len(runs), rng, n_boot)
    corrected, steps = None, None
    if all(r.step_seconds for r in (*baseline, *runs)):
        steps = tuple(float(sum(r.seconds / r.step_seconds for r in rs)) for rs in (baseline, runs))
        corrected = float((steps[0] / base_tok.sum()) / (steps[1] / mine_tok.sum()))
    per_run = [float((b / bt) / (m / mt)) for b, bt, m, mt in zip(base, base_tok, mine, mine_tok)]
    return Comparison(value, ci, per_run, corrected,
                      (float(np.mean([r.prefill_seconds for r in baseline])), float(np.mean([r.prefill_seconds for r in runs]))),
                      (float(base.sum()), float(mine.sum())), (int(base_tok.sum()), int(mine_tok.sum())), clock, steps)


def _seconds(runs: Sequence[Run], clock: str) -> np.ndarray:
    return np.array([r.seconds if clock == "wall" else r.cpu_seconds for r in runs], dtype=np.float64)


def compare(method: Method, scorer: Scorer, prompts: Sequence[Sequence[int]], new_tokens: int,
            sampling: SamplingConfig, repeats: int = 1, seed: int = 0, baseline: Method | None = None,
            rng: np.random.Generator | None = None, **measure_options: Any) -> tuple[Comparison, dict[str, list[Run]]]:
    """Run `method` and the baseline (default: plain autoregressive decoding) interleaved on the
    same prompts (`measure`) and return their Comparison with the runs themselves."""
    base = baseline if baseline is not None else plain()
    runs = measure([base, method], scorer, prompts, new_tokens, sampling, seed, repeats, **measure_options)
    return speedup(runs[base.name], runs[method.name], rng), runs
