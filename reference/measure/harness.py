"""The one comparison harness: decoding methods run interleaved on the same prompts, every run
timed the same way. The validation, BiLD's sweep, `decode --baseline` and the benchmark
scripts measure through it; `specdec.reference.measure.speedup` turns its runs into the one
measured speedup. How runs are ordered and checked: docs/validation.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.loop import AcceptanceRule, DecodeResult, SpeculativeSampling, decode
from specdec.reference.core.policy import DraftPolicy
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seeds import derive_seed
from specdec.reference.core.prompt import as_prompt
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.scorer import Scorer
from specdec.reference.drafters.protocol import Drafter, NoDrafter
from specdec.reference.measure.interference import DEFAULT_THRESHOLD, run_undisturbed


class Method(Protocol):
    """Anything the harness can time: one decode of one prompt."""

    name: str

    def decode(self, scorer: Scorer, prompt: Sequence[int], new_tokens: int, sampling: SamplingConfig,
               generator: torch.Generator | None, eos_id: int | None, fuse_prefill: bool) -> DecodeResult: ...


@dataclass(frozen=True, eq=False)
class Decoding:
    """A method of the one decode loop: a drafter, its draft length gamma (or a draft-length
    policy, `specdec.reference.core.policy`) and an acceptance rule (gamma 0 with the NoDrafter
    is the autoregressive baseline). sampling: this method's own
    (BiLD's greedy reference next to sampled methods); None takes the run's. scorer: this
    method's own target (e.g. the same model on another backend); None takes the run's."""

    name: str
    drafter: Drafter = field(default_factory=NoDrafter)
    gamma: int | DraftPolicy = 0
    rule: AcceptanceRule = SpeculativeSampling()
    sampling: SamplingConfig | None = None
    scorer: Scorer | None = None

    def decode(self, scorer: Scorer, prompt: Sequence[int], new_tokens: int, sampling: SamplingConfig,
               generator: torch.Generator | None, eos_id: int | None, fuse_prefill: bool) -> DecodeResult:
        return decode(self.scorer or scorer, self.drafter, prompt, new_tokens, self.gamma, self.sampling or sampling,
                      generator, self.rule, eos_id, fuse_prefill)


def baseline(sampling: SamplingConfig | None = None, name: str = "baseline") -> Decoding:
    """The autoregressive baseline: one target pass per token, the same loop and cache handling."""
    return Decoding(name, NoDrafter(), 0, sampling=sampling)


@dataclass
class Run:
    """One decode of one prompt by one method.

    seconds: decode wall time with the separate prefill excluded (a fused prefill is inside);
    prefill_seconds: that separate prefill (0 when fused); cpu_seconds: this process's CPU time
    of the decode, the separate prefill excluded likewise; load: cores other processes kept busy
    meanwhile; attempts: tries made
    (> 1 when disturbed runs were redone); step_seconds: a one-token target pass probed just
    before and after the run (mean), None without a probe.
    """

    method: str
    prompt: int
    repeat: int
    result: DecodeResult
    seconds: float
    prefill_seconds: float
    cpu_seconds: float
    load: float = 0.0
    attempts: int = 1
    step_seconds: float | None = None

    @property
    def stats(self) -> DecodeStats:
        return self.result.stats

    @property
    def tokens(self) -> int:
        return self.result.stats.new_tokens

    @property
    def output(self) -> list[int]:
        return self.result.tokens


def measure(methods: Sequence[Method], scorer: Scorer, prompts: Sequence[Sequence[int]], new_tokens: int,
            sampling: SamplingConfig, seed: int = 0, repeats: int = 1, seeds: Callable[[int, int], int] | None = None,
            eos_id: int | None = None, fuse_prefill: bool = False, between: Callable[[], None] | None = None,
            probe: Callable[[], float] | None = None, retries: int = 0, threshold: float = DEFAULT_THRESHOLD,
            warm_up: int = 0, progress: Callable[[Run], None] | None = None, bracket: str | None = None
            ) -> dict[str, list[Run]]:
    """Run every method on every prompt, `repeats` times; returns each method's runs in
    (repeat, prompt) order, so runs of two methods pair by position.

    Interleaving: for each repeat and prompt, all methods run back to back in an order rotated by
    one each time, with the same generator seed (`seeds(repeat, prompt)`, default derived from
    `seed`), so a slow drift of the machine's speed hits every method alike. `between` runs
    before each such block (e.g. a sweep of target step times); a run during which other
    processes used more than `threshold` CPU cores is redone up to `retries` times; `probe` (a
    one-token target step) is timed between consecutive runs and each run records the mean of
    the probes around it. warm_up: tokens each method decodes once, untimed, on the first prompt
    (first-call allocations count against no method). progress(run) is called after each run.
    bracket: the name of a method (the baseline) that runs first and last in every block, the
    others rotating between; its two runs count as one (`bracketed`), so each method between
    is compared with the mean of a run before it and a run after it: a drift within the block
    (a VM's speed moving 5-15 % within seconds) no longer falls on the one baseline run alone.
    """
    if repeats < 1:
        raise SpecdecError(f"repeats must be >= 1, got {repeats}")
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise SpecdecError(f"method names must differ, got {names}")
    seeds = seeds or (lambda r, j: derive_seed(seed, r, j))
    device = scorer.device
    if warm_up:
        for method in methods:
            method.decode(scorer, prompts[0], warm_up, sampling, torch.Generator(device=device).manual_seed(0),
                          None, fuse_prefill)
    if bracket is not None and bracket not in names:
        raise SpecdecError(f"bracket names no method: {bracket!r} not in {names}")
    ends = [m for m in methods if m.name == bracket]
    rotating = [m for m in methods if m.name != bracket]
    runs: dict[str, list[Run]] = {name: [] for name in names}
    turn = 0
    last_probe: float | None = None
    for r in range(repeats):
        for j, prompt in enumerate(prompts):
            at = turn % max(len(rotating), 1)
            order = ends + rotating[at:] + rotating[:at] + ends
            turn += 1
            if between is not None:
                between()
                last_probe = None  # that took time: probe again before the next run
            for method in order:
                before = last_probe if last_probe is not None else (probe() if probe is not None else None)

                def once(method=method, prompt=prompt) -> DecodeResult:
                    generator = torch.Generator(device=device).manual_seed(seeds(r, j))
                    return method.decode(scorer, as_prompt(prompt), new_tokens, sampling, generator, eos_id,
                                         fuse_prefill)

                result, load, attempts = run_undisturbed(once, retries, threshold)
                last_probe = probe() if probe is not None else None
                s = result.stats
                run = Run(method.name, j, r, result, s.time_total - s.time_prefill, s.time_prefill,
                          s.cpu_total - s.cpu_prefill, load, attempts,
                          None if probe is None else 0.5 * (before + last_probe))
                runs[method.name].append(run)
                if progress is not None:
                    progress(run)
            if ends:
                second = runs[bracket].pop()
                runs[bracket][-1] = bracketed(runs[bracket][-1], second)
    return runs


def bracketed(first: Run, second: Run) -> Run:
    """Two runs of one method on one prompt (the same seed: the same tokens) as one: its times
    the mean of the two, its counts the first's; attempts counts the redone tries of either on
    top of one (1: neither was redone)."""
    if first.tokens != second.tokens:
        raise SpecdecError(f"{first.method}: the two runs of prompt {first.prompt} emitted {first.tokens} and "
                           f"{second.tokens} tokens")
    mean = lambda a, b: None if a is None or b is None else 0.5 * (a + b)  # noqa: E731
    return Run(first.method, first.prompt, first.repeat, first.result, mean(first.seconds, second.seconds),
               mean(first.prefill_seconds, second.prefill_seconds), mean(first.cpu_seconds, second.cpu_seconds),
               max(first.load, second.load), first.attempts + second.attempts - 1,
               mean(first.step_seconds, second.step_seconds))


def fastest(runs: Sequence[Run]) -> list[Run]:
    """Per prompt, the fastest of its repeats (other jobs only ever slow a run down), in prompt
    order; the repeats must have produced the same tokens."""
    best: dict[int, Run] = {}
    for run in runs:
        kept = best.get(run.prompt)
        if kept is not None and kept.output != run.output:
            raise SpecdecError(f"{run.method}: the repeats of prompt {run.prompt} decoded different tokens (a "
                               "non-deterministic device?), so the fastest of them is not a time of one decode: "
                               "use one repeat")
        if kept is None or run.seconds < kept.seconds:
            best[run.prompt] = run
    return [best[j] for j in sorted(best)]
