"""The decode measurements of a validation: every (drafter, gamma) and the baseline on the
same prompts, interleaved, with interference checks and drift probes (docs/validation.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from specdec.reference.core.loop import speculative_decode
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seeds import derive_seed
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.target import TargetScorer
from specdec.reference.drafters.protocol import Drafter, NoDrafter, Proposal
from specdec.reference.estimate.interference import DEFAULT_THRESHOLD, run_undisturbed
from specdec.reference.estimate.timing import TargetTiming


class RecordingDrafter:
    """Wraps a drafter and records the length of every proposal (the decode's k per iteration)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.lengths: list[int] = []

    def start(self, prompt: Sequence[int]) -> None:
        self.inner.start(prompt)

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                **kwargs) -> Proposal:
        proposal = self.inner.propose(gamma, sampling, generator, **kwargs)
        self.lengths.append(len(proposal))
        return proposal

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        self.inner.commit(n_accepted, tokens)


@dataclass
class DecodeRuns:
    """Merged statistics and decode times of one configuration over all prompts and repeats."""

    stats: DecodeStats
    seconds: float = 0.0  # decode time, prefill excluded
    tokens: int = 0
    lengths: list[int] = field(default_factory=list)  # proposal length of every iteration
    per_run: list[tuple[float, int, int, int]] = field(default_factory=list)  # (seconds, tokens, accepted, reached)
    loads: list[float] = field(default_factory=list)  # foreign CPU load (cores) during each kept run
    attempts: int = 0  # decode attempts made (> runs when disturbed runs were redone)
    steps: list[float] = field(default_factory=list)  # each run's seconds / the probe's t(1) around it

    @property
    def step_seconds(self) -> float:
        """Decode time in target steps of the moment (drift-corrected), summed over runs."""
        return float(sum(self.steps))


def _run_decode(scorer: TargetScorer, drafter: Drafter, prompt: list[int], new_tokens: int, gamma: int,
                sampling: SamplingConfig, seed: int) -> tuple[DecodeStats, list[int]]:
    """One decode's statistics and its proposal lengths (the baseline: the NoDrafter, gamma 0)."""
    gen = torch.Generator(device=scorer.device).manual_seed(seed)
    recorder = RecordingDrafter(drafter)
    result = speculative_decode(scorer, recorder, prompt, new_tokens, gamma, sampling, gen)
    # the decoder does not call propose when no room is left (the last token): k = 0 there
    lengths = recorder.lengths + [0] * (result.stats.iterations - len(recorder.lengths))
    return result.stats, lengths


def measure_decodes(target: torch.nn.Module, drafters: dict[str, Any], prompts: Sequence[Sequence[int]],
                    gammas: Sequence[int], sampling: SamplingConfig, new_tokens: int, repeats: int, seed: int,
                    progress: bool = False, sweep: Callable[[], TargetTiming] | None = None, retries: int = 3,
                    threshold: float = DEFAULT_THRESHOLD, probe: Callable[[], float] | None = None
                    ) -> tuple[dict[tuple[str, int], DecodeRuns], list[TargetTiming]]:
    """Decode every prompt with the baseline (key ("baseline", 0)) and every (drafter, gamma).

    Runs are interleaved: for each repeat and prompt, all configurations run back to back in
    an order rotated by one each time; all of them use the same seed for that prompt/repeat.
    `sweep` (e.g. a short `time_target_passes`) runs before each such block, so the target
    step times are also sampled while the decodes run; its results are returned. A run (or
    sweep) during which other processes used more than `threshold` CPU cores is redone, up
    to `retries` times (`specdec.reference.estimate.interference`). `probe` (a `TargetProbe`) is timed
    between consecutive runs; each run's time is also recorded in target steps of that
    moment, seconds / mean(probe before, probe after) (`DecodeRuns.steps`).
    """
    configs = [("baseline", 0)] + [(name, g) for name in drafters for g in gammas]
    runs = {cfg: DecodeRuns(DecodeStats(cfg[1])) for cfg in configs}
    scorer = TargetScorer(target)
    bar = progress_bar(repeats * len(prompts) * len(configs), f"decoding (T={sampling.temperature:g})", "run",
                       progress)
    turn = 0
    sweeps: list[TargetTiming] = []
    last_probe: float | None = None
    for r in range(repeats):
        for j, prompt in enumerate(prompts):
            run_seed = derive_seed(seed, r, j)
            order = configs[turn % len(configs):] + configs[:turn % len(configs)]
            turn += 1
            if sweep is not None:
                sweeps.append(run_undisturbed(sweep, retries, threshold)[0])
                last_probe = None  # the sweep took time: probe again before the next run
            for name, g in order:
                drafter = NoDrafter() if name == "baseline" else drafters[name]
                before = last_probe if last_probe is not None else (probe() if probe is not None else None)
                (stats, lengths), load, attempts = run_undisturbed(
                    lambda: _run_decode(scorer, drafter, list(prompt), new_tokens, g, sampling, run_seed),
                    retries, threshold)
                last_probe = probe() if probe is not None else None
                entry = runs[(name, g)]
                entry.loads.append(load)
                entry.attempts += attempts
                entry.stats = entry.stats.merge(stats)
                seconds = stats.time_total - stats.time_prefill
                entry.seconds += seconds
                if probe is not None:
                    entry.steps.append(seconds / (0.5 * (before + last_probe)))
                entry.tokens += stats.new_tokens
                entry.lengths.extend(lengths)
                entry.per_run.append((seconds, stats.new_tokens, sum(stats.accepted), sum(stats.reached)))
                bar.update(1)
    bar.close()
    return runs, sweeps
