"""The decode measurements of a validation: every (drafter, gamma) and the baseline on the same
prompts, through the one comparison harness (interleaved, with interference checks, drift
probes and step-time sweeps between blocks; docs/validation.md)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from specdec.reference.core.policy import parse_policy
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.estimate.timing import TargetTiming
from specdec.reference.measure.harness import Decoding, Run, baseline, measure
from specdec.reference.measure.interference import DEFAULT_THRESHOLD, run_undisturbed

BASELINE = ("baseline", 0)


def drafter_gammas(drafter: Any, gammas: Sequence[int]) -> list[int]:
    """The gammas a drafter runs: those it can fill (a drafter with `max_draft` H runs gamma <= H
    only, since gamma > H would decode exactly as gamma = H)."""
    return [g for g in gammas if drafter.max_draft is None or g <= drafter.max_draft]


def measure_decodes(target: torch.nn.Module, drafters: dict[str, Any], prompts: Sequence[Sequence[int]],
                    gammas: Sequence[int], sampling: SamplingConfig, new_tokens: int, repeats: int, seed: int,
                    progress: bool = False, sweep: Callable[[], TargetTiming] | None = None, retries: int = 3,
                    threshold: float = DEFAULT_THRESHOLD, probe: Callable[[], float] | None = None,
                    policies: Sequence[str] = ()
                    ) -> tuple[dict[tuple[str, int | str], list[Run]], list[TargetTiming]]:
    """Runs of the baseline (key ("baseline", 0)) and every (drafter, gamma) of `drafter_gammas`, in (repeat, prompt)
    order, EOS ignored (every run emits new_tokens tokens), every run of a (repeat, prompt)
    drawing from the same seed; the baseline brackets each block (`measure`'s bracket).
    `policies`: draft-length rules (`parse_policy` spellings, the field --gamma fills set to
    max(gammas)) every drafter also runs, keyed (name, spelling), each
    method with a policy object of its own. `sweep` (e.g. a short `time_target_passes`, itself redone when
    disturbed) runs before each block of runs; its timings are returned."""
    methods = [baseline()] + [Decoding(f"{name}/gamma={g}", drafter, g) for name, drafter in drafters.items()
                              for g in drafter_gammas(drafter, gammas)]
    keys = [BASELINE] + [(name, g) for name, drafter in drafters.items() for g in drafter_gammas(drafter, gammas)]
    for name, drafter in drafters.items():
        for spelling in policies:
            methods.append(Decoding(f"{name}/{spelling}", drafter, parse_policy(spelling, max(gammas))))
            keys.append((name, spelling))
    bar = progress_bar(repeats * len(prompts) * (len(methods) + 1), f"decoding (T={sampling.temperature:g})", "run",
                       progress)
    sweeps: list[TargetTiming] = []
    between = None if sweep is None else (lambda: sweeps.append(run_undisturbed(sweep, retries, threshold)[0]))
    runs = measure(methods, TargetScorer(target), prompts, new_tokens, sampling, seed, repeats, between=between,
                   probe=probe, retries=retries, threshold=threshold, progress=lambda run: bar.update(1),
                   bracket=methods[0].name)
    bar.close()
    return {key: runs[method.name] for key, method in zip(keys, methods)}, sweeps
