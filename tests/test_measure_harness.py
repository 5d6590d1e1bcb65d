"""The one comparison harness and the one measured speedup (reference/measure/):

- `speedup` is baseline decode seconds per token / method decode seconds per token, summed
  over paired runs, with the separate prefill excluded and reported beside it (hand-made runs
  with known times: the value is exact); identical runs give exactly 1; the drift-corrected
  value divides each run by its probed step; the interval is seeded and holds the value;
- `measure` interleaves: every (repeat, prompt) block runs each method once, the order rotated
  by one block to the next, all methods of a block drawing from the same seed; disturbed runs
  are redone (`retries`) and the probes bracket each run; a bracketing baseline (first and last
  in every block, its two runs as one) cancels a steady drift;
- `fastest` keeps each prompt's fastest repeat and refuses repeats that decoded differently;
- `compare` on a tiny real model: greedy prompt lookup emits the baseline's tokens exactly.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.errors import SpecdecError
from specdec.reference.core.loop import DecodeResult
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.measure.harness import Decoding, Run, fastest, measure
from specdec.reference.measure.speedup import compare, speedup
from tests.fakes import random_prompts
from tests.tiny_models import tiny_llama


def _run(seconds: float, prefill: float, tokens: int, prompt: int = 0, repeat: int = 0, step: float | None = None,
         output: list[int] | None = None) -> Run:
    stats = DecodeStats(0, new_tokens=tokens, time_total=seconds + prefill, time_prefill=prefill)
    result = DecodeResult(output if output is not None else [0] * tokens, [False] * tokens, stats)
    return Run("m", prompt, repeat, result, seconds, prefill, seconds, step_seconds=step)


def test_speedup_is_pooled_decode_time_per_token_without_the_prefill() -> None:
    base = [_run(2.0, 0.5, 10, 0), _run(4.0, 0.5, 20, 1)]
    mine = [_run(1.0, 5.0, 10, 0), _run(1.0, 5.0, 10, 1)]  # a slow prefill changes nothing
    c = speedup(base, mine, np.random.default_rng(0))
    assert c.speedup == pytest.approx((6.0 / 30) / (2.0 / 20))
    assert c.per_run == pytest.approx([2.0, 2.0]) and c.prefill_seconds == (0.5, 5.0)
    assert c.seconds == (6.0, 2.0) and c.tokens == (30, 20) and c.corrected is None
    assert c.ci[0] <= c.speedup <= c.ci[1]
    assert speedup(base, mine, np.random.default_rng(0)).ci == c.ci  # seeded
    assert speedup(base, base).speedup == 1.0 and speedup(base, base).ci == (1.0, 1.0)


def test_drift_corrected_speedup_divides_each_run_by_its_step() -> None:
    base = [_run(2.0, 0.0, 10, step=0.2), _run(1.0, 0.0, 10, step=0.1)]  # the machine slowed 2x for the first
    mine = [_run(0.5, 0.0, 10, step=0.1), _run(1.0, 0.0, 10, step=0.2)]
    c = speedup(base, mine)
    assert c.corrected == pytest.approx((10 + 10) / (5 + 5))
    with pytest.raises(ValueError, match="same number"):
        speedup(base, mine[:1])


class Recorder:
    """A method that decodes nothing: records (name, prompt, the generator's first draw)."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def decode(self, scorer, prompt, new_tokens, sampling, generator, eos_id, fuse_prefill) -> DecodeResult:
        self.log.append((self.name, prompt[0], float(torch.rand(1, generator=generator))))
        return DecodeResult([1] * new_tokens, [False] * new_tokens, DecodeStats(0, new_tokens=new_tokens,
                                                                               time_total=0.01))


class _NoScorer:
    """The harness only asks a scorer for its device; these methods decode nothing."""

    device = torch.device("cpu")


def test_measure_interleaves_with_one_seed_per_block() -> None:
    log: list = []
    methods = [Recorder(n, log) for n in ("a", "b", "c")]
    prompts = [[10], [11]]
    runs = measure(methods, _NoScorer(), prompts, 3, SamplingConfig(1.0), seed=5, repeats=2)
    order = [name for name, _, _ in log]
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]  # rotated by one block each time
    blocks = [log[i:i + 3] for i in range(0, 12, 3)]
    for block in blocks:  # one prompt and one seed per block
        assert len({p for _, p, _ in block}) == 1 and len({draw for _, _, draw in block}) == 1
    assert len({block[0][2] for block in blocks}) == 4  # and a different seed for every (repeat, prompt)
    assert [(r.repeat, r.prompt) for r in runs["b"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    with pytest.raises(ValueError, match="names must differ"):
        measure([methods[0], methods[0]], _NoScorer(), prompts, 3, SamplingConfig(0.0))


class Drifting:
    """A method whose run takes `work` seconds on a machine that slows by `drift` per run made
    (a shared clock): the harness's decode seconds are the stats' time_total."""

    def __init__(self, name: str, work: float, clock: list, drift: float = 0.1) -> None:
        self.name, self.work, self.clock, self.drift = name, work, clock, drift

    def decode(self, scorer, prompt, new_tokens, sampling, generator, eos_id, fuse_prefill) -> DecodeResult:
        self.clock[0] += 1
        seconds = self.work * (1 + self.drift * self.clock[0])
        return DecodeResult([1] * new_tokens, [False] * new_tokens,
                            DecodeStats(0, new_tokens=new_tokens, time_total=seconds))


def test_a_bracketing_baseline_cancels_a_steady_drift() -> None:
    # the machine slows 10 % a run: with one baseline run a block, the methods after it look
    # slower than they are; with the baseline first and last, each is compared with their mean
    clock = [0]
    methods = [Drifting("base", 1.0, clock), Drifting("x", 0.5, clock), Drifting("y", 0.5, clock)]
    once = measure(methods, _NoScorer(), [[1]], 4, SamplingConfig(0.0))
    assert speedup(once["base"], once["x"]).speedup == pytest.approx(2 * 1.1 / 1.2)  # 8 % off
    clock[0] = 0
    runs = measure(methods, _NoScorer(), [[1], [2]], 4, SamplingConfig(0.0), bracket="base")
    assert [r.prompt for r in runs["base"]] == [0, 1] and len(runs["x"]) == 2
    for name in ("x", "y"):  # a run k steps into the block against the mean of steps 1 and 4
        assert speedup(runs["base"], runs[name]).speedup == pytest.approx(2.0, rel=0.06)
    assert runs["base"][0].seconds == pytest.approx(0.5 * (1.1 + 1.4))
    assert runs["base"][0].attempts == 1  # neither of its two runs was redone
    with pytest.raises(SpecdecError, match="bracket"):
        measure(methods, _NoScorer(), [[1]], 4, SamplingConfig(0.0), bracket="z")


def test_disturbed_runs_are_redone_and_probes_bracket_each_run(monkeypatch) -> None:
    import specdec.reference.measure.interference as interference

    monkeypatch.setattr(interference.CpuMonitor, "stop", lambda self: 0.5)  # always disturbed
    monkeypatch.setattr(interference.time, "sleep", lambda seconds: None)
    probes = iter([1.0, 3.0, 5.0, 7.0])
    runs = measure([Recorder("a", []), Recorder("b", [])], _NoScorer(), [[1]], 2, SamplingConfig(0.0), retries=2,
                   probe=lambda: next(probes))
    a, b = runs["a"][0], runs["b"][0]
    assert a.attempts == b.attempts == 3 and a.load == 0.5
    assert (a.step_seconds, b.step_seconds) == (2.0, 4.0)  # the mean of the probes before and after it


def test_fastest_keeps_each_prompts_fastest_repeat() -> None:
    runs = [_run(3.0, 0, 5, 0, 0), _run(2.0, 0, 5, 1, 0), _run(1.0, 0, 5, 0, 1), _run(4.0, 0, 5, 1, 1)]
    assert [r.seconds for r in fastest(runs)] == [1.0, 2.0]
    with pytest.raises(ValueError, match="differ"):
        fastest([_run(1.0, 0, 2, 0, 0, output=[1, 2]), _run(1.0, 0, 2, 0, 1, output=[1, 3])])


def test_compare_on_a_tiny_model_keeps_greedy_output_exact() -> None:
    target = tiny_llama(64, seed=0, sharpness=8.0)
    prompts = [p + p for p in random_prompts(3, 6, seed=1)]  # repeated text: lookup finds matches
    method = Decoding("lookup", PromptLookupDrafter(2), 3)
    comparison, runs = compare(method, TargetScorer(target), prompts, 12, SamplingConfig(0.0), repeats=2)
    assert [r.output for r in runs["lookup"]] == [r.output for r in runs["baseline"]]
    assert all(r.tokens == 12 for r in runs["lookup"]) and len(comparison.per_run) == 6
    assert comparison.speedup > 0 and comparison.ci[0] <= comparison.speedup <= comparison.ci[1]
    assert sum(sum(r.stats.accepted) for r in runs["lookup"]) > 0  # drafts were kept: the comparison is real
