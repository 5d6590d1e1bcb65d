"""Predicted vs measured speedup: run the decoders and compare with the simulator.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target step-time ratio, `p` target, `q` draft; v(k) the verify-cost
curve and o(k) the decoder's loop overhead (`specdec.reference.estimate.cost`).

For one target, several drafters, a list of gamma and of temperatures:

1. estimate alpha per (drafter, temperature) on the target's own samples of held-out
   prompts (`specdec.reference.estimate.alpha`), and the costs: t(k) and v(k) once, the loop
   overhead o(k) per temperature, the draft step (c) per (drafter, temperature);
2. decode held-out prompts with the reference decoder for every (drafter, gamma) and with
   the autoregressive baseline, interleaved (each prompt and repeat runs the baseline and
   every configuration back to back, in a rotating order), same seed for all of them, EOS
   ignored so every run emits exactly `new_tokens` tokens;
3. measured speedup = (baseline decode seconds per token) / (speculative decode seconds per
   token), decode time excluding the prefill (identical for both; Theorem 8 is about the
   decoding loop), with a bootstrap interval over the runs; and the same drift-corrected:
   each run's seconds divided by the time of a one-token target pass probed right before
   and after it (`TargetProbe`), i.e. in target steps of that moment. On a VM whose speed
   flips between states within seconds (measured here: 45 vs 65 ms per step), this
   removes most of the noise the wall-clock ratio of few runs carries; with a steady
   machine both are the same;
4. three predictions of it, each from the simulator:

   (i)  paper: Theorem 8, (1 - a^(gamma+1)) / ((1 - a)(gamma c + 1)), with a = the
        estimator's teacher-forced alpha and c the timed draft/target step ratio; it assumes
        gamma + 1 target evaluations cost one step (v == 1) and no other overhead;
   (ii) extended, measured acceptance: E(tokens per iteration) = 1 + sum_i prod_{j<=i}
        alpha'_j with alpha'_i = accepted_i / accepted_{i-1} the per-position acceptance
        MEASURED in the decode (a position without a proposal counts as a rejection, so this
        reproduces the measured tokens per iteration), and the cost of each iteration with k
        drafts k c + v(k + 1) + o(k) in target steps, averaged over the proposal lengths k
        the decode actually used (recorded; k < gamma near the end of the budget and for
        prompt lookup); the baseline costs 1 + o(0) per token. This tests the cost model;
   (iii) extended, estimated acceptance: the same cost model with acceptance from the
        estimator alone: at temperature 0 the exact replay of greedy decoding from the
        teacher-forced blocks (`specdec.reference.estimate.replay`) on the first new_tokens positions of
        the estimator's samples (the decodes' budget and place); at T > 0 the i.i.d. alpha with full gamma-token
        proposals, or, for prompt lookup, alpha_when_proposed over the teacher-forced
        distribution of its proposal lengths; both for runs of exactly new_tokens tokens
        (`budgeted_speedup`: the decoder never drafts past the budget).

   Folding the overheads into the simulator's parameters makes (ii) and (iii) plain calls
   of `simulator.positional_walltime_improvement` / `iteration_time`:
   c' = c / (1 + o(0)), v'(k) = (v(k) + o(k - 1)) / (1 + o(0)), so v'(1) = 1 and
   speedup = E(tokens) / mean(k c' + v'(k + 1)).

5. the estimator's alpha vs the decode's `DecodeStats.alpha()` (accepted / reached draft
   positions): inside the estimator's 95% interval or not. The estimator's value used here
   is its alpha over the first new_tokens positions of its continuations (`window_alpha`:
   the stretch the decodes generate; prompt lookup's acceptance grows with the text
   generated so far). Even so they are not the same quantity: the decode's positions
   i >= 2 condition on accepted drafts, and iteration starts are not uniformly random
   positions; for prompt lookup the decode counts only positions where something was
   proposed, so it is compared with alpha_when_proposed.
"""
from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.drafters.protocol import Proposal
from specdec.reference.estimate.alpha import DEFAULT_LENIENCE, AlphaEstimate, bootstrap_ratio_ci, estimate_alpha
from specdec.reference.estimate.cost import CostEstimate, assemble_cost, loop_overhead
from specdec.reference.estimate.timing import TargetProbe, TargetTiming, pool_timings, time_draft_steps, time_target_passes
from specdec.reference.estimate.interference import DEFAULT_THRESHOLD, run_undisturbed
from specdec.reference.estimate.replay import replay
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.target import TargetScorer
from specdec.reference.estimate.samples import TargetSamples, generate_continuations
from specdec.simulator import (expected_tokens, iteration_time, make_plan, positional_expected_tokens,
                       walltime_improvement)

TOLERANCE = 0.10  # the goal: extended model within 10% of the measured speedup


@dataclass(frozen=True)
class ValidationConfig:
    """Sizes of one validation run.

    gammas / temperatures: the grid (every drafter runs every gamma at every temperature).
    top_k / top_p: applied at every temperature > 0 (0 / 1 = off).
    prompts, prompt_tokens, new_tokens, repeats: the decode runs (held-out prompts).
    alpha_prompts, alpha_new_tokens: the estimator's sample (alpha_prompts x alpha_new_tokens
        target-sampled positions per temperature).
    context_tokens: KV-cache length for the cost timings (None: prompt_tokens + new_tokens/2,
        the mean context of the decode runs).
    max_k: verify-cost curve v(1..max_k); gammas must be < max_k.
    timing_repeats: runs of each k in the up-front timing of t(1..max_k);
    sweep_repeats: runs of each k = 1..max(gammas)+1 timed again before every decode block
        (0 = off), at a context cycling through `sweep_contexts()`; a temperature's v(k) pools
        the up-front runs and its sweeps (so the cost model's inputs are sampled across the
        decodes' contexts and while they run).
    retries, interference_threshold: a timed run during which other processes kept more than
        the threshold (cores, average) busy is redone up to `retries` times.
    probe: time a few one-token target passes between decode runs, to also report the
        measured speedup in target steps of the moment (drift-corrected).
    """

    gammas: tuple[int, ...] = (1, 2, 4)
    temperatures: tuple[float, ...] = (0.0, 1.0)
    top_k: int = 0
    top_p: float = 1.0
    prompts: int = 12
    prompt_tokens: int = 64
    new_tokens: int = 16
    repeats: int = 1
    alpha_prompts: int = 32
    alpha_new_tokens: int = 64
    batch_size: int = 16
    context_tokens: int | None = None
    max_k: int = 16
    timing_repeats: int = 7
    sweep_repeats: int = 2
    retries: int = 3
    interference_threshold: float = DEFAULT_THRESHOLD
    probe: bool = True
    draft_repeats: int = 20
    bootstrap: int = 2000
    lenience: tuple[float, ...] = DEFAULT_LENIENCE
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.gammas or min(self.gammas) < 1:
            raise ValueError(f"gammas must be positive integers, got {self.gammas}")
        if max(self.gammas) >= self.max_k:
            raise ValueError(f"gammas must be < max_k = {self.max_k} (v(gamma + 1) is needed), got {max(self.gammas)}")
        if not self.temperatures or min(self.temperatures) < 0:
            raise ValueError(f"temperatures must be >= 0, got {self.temperatures}")
        if self.sweep_repeats < 0 or self.retries < 0:
            raise ValueError(f"sweep_repeats and retries must be >= 0, got {self.sweep_repeats}, {self.retries}")
        for name in ("prompts", "prompt_tokens", "new_tokens", "repeats", "alpha_prompts", "alpha_new_tokens",
                     "batch_size", "timing_repeats", "draft_repeats", "bootstrap"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.new_tokens < 2:
            raise ValueError(f"new_tokens must be >= 2, got {self.new_tokens}")

    @property
    def context(self) -> int:
        return self.context_tokens or self.prompt_tokens + self.new_tokens // 2

    def sweep_contexts(self) -> list[int]:
        """KV-cache lengths the sweeps cycle through: the quartiles of the decodes' context
        (prompt_tokens + new_tokens / 4, / 2, 3 / 4), since t(k) grows with the context."""
        if self.context_tokens:
            return [self.context_tokens]
        return [self.prompt_tokens + (q * self.new_tokens) // 4 for q in (1, 2, 3)]

    def sampling(self, temperature: float) -> SamplingConfig:
        if temperature == 0:
            return SamplingConfig(0.0)
        return SamplingConfig(temperature, self.top_k, self.top_p)


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


def survival_acceptance(stats: DecodeStats) -> list[float]:
    """alpha'_i = accepted_i / accepted_{i-1} (accepted_0 = iterations), i = 1..gamma.

    Unlike `DecodeStats.alpha_per_position` the denominator counts every iteration that got
    that far, proposal or not, so 1 + sum_i prod_{j<=i} alpha'_j = 1 + accepted / iterations,
    the measured tokens per iteration. Positions never reached get 0.
    """
    previous = [stats.iterations] + stats.accepted[:-1]
    return [a / r if r else 0.0 for a, r in zip(stats.accepted, previous)]


def effective_cost(cost: CostEstimate) -> tuple[float, np.ndarray]:
    """(c', v') with the loop overhead folded in: c' = c / (1 + o(0)),
    v'(k) = (v(k) + o(k - 1)) / (1 + o(0)); v'(1) = 1 (see the module doc)."""
    o = np.asarray(cost.overhead)  # [K] in target steps, o(0..K-1)
    v = np.asarray(cost.verify_cost)  # [K] v(1..K)
    base = 1.0 + o[0]
    return cost.c / base, (v + o) / base


def mean_iteration_time(k_hist: np.ndarray, c: float, verify_cost: np.ndarray) -> float:
    """Mean of k c + v(k + 1) over iterations, from a histogram of proposal lengths k_hist[k]."""
    ks = np.arange(k_hist.shape[0])
    times = iteration_time(ks, c, verify_cost)
    return float((k_hist * times).sum() / k_hist.sum())


def k_histogram(lengths: Sequence[int], gamma: int) -> np.ndarray:
    return np.bincount(np.asarray(lengths, dtype=np.int64), minlength=gamma + 1)[:gamma + 1].astype(np.float64)


def window_alpha(alpha: AlphaEstimate, new_tokens: int, deterministic: bool, rng: np.random.Generator
                 ) -> tuple[str, float, tuple[float, float]]:
    """The estimator's alpha over the first new_tokens positions of its sequences (the part
    of a continuation the decodes generate), with its bootstrap interval over prompts;
    for a deterministic drafter over the positions with a proposal (what the decode's
    accepted / reached counts). Returns (name, value, interval)."""
    sums, counts = [], []
    for s in alpha.scores:
        beta, proposed = s.beta[:new_tokens], s.proposed[:new_tokens]
        keep = proposed if deterministic else np.ones_like(proposed)
        sums.append(float(beta[keep].sum()))
        counts.append(float(keep.sum()))
    sums_a, counts_a = np.array(sums), np.array(counts)
    name = f"{'alpha_when_proposed' if deterministic else 'alpha'} over the first {new_tokens} positions"
    if counts_a.sum() == 0:
        return name, float("nan"), (float("nan"), float("nan"))
    value = float(sums_a.sum() / counts_a.sum())
    nonzero = counts_a > 0
    return name, value, bootstrap_ratio_ci(sums_a[nonzero], counts_a[nonzero], rng)


def alpha_agreement_z(estimate: float, estimate_ci: Sequence[float], decode: float,
                      decode_ci: Sequence[float]) -> float:
    """Two-sample z statistic of decode minus estimate: the standard errors are read off the
    two independent 95% intervals (half-width / 1.96); |z| <= 1.96 means the two measurements
    agree at the 5% level."""
    se = np.sqrt(sum(((hi - lo) / (2 * 1.959964)) ** 2 for lo, hi in (estimate_ci, decode_ci)))
    difference = decode - estimate
    if se == 0:  # both exact (e.g. a drafter that always agrees)
        return 0.0 if difference == 0 else float(np.copysign(np.inf, difference))
    return float(difference / se)


def paired_ratio_ci(baseline: Sequence[tuple], runs: Sequence[tuple], rng: np.random.Generator,
                    n_boot: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of the measured speedup, resampling (prompt, repeat) pairs.

    baseline, runs: per-run (seconds, tokens, ...) tuples, paired by position.
    """
    b = np.array([[x[0], x[1]] for x in baseline], dtype=np.float64)  # [n, 2]
    r = np.array([[x[0], x[1]] for x in runs], dtype=np.float64)
    n = b.shape[0]
    w = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)  # [n_boot, n]
    ratio = ((w @ b[:, 0]) / (w @ b[:, 1])) / ((w @ r[:, 0]) / (w @ r[:, 1]))
    lo, hi = np.quantile(ratio, [0.025, 0.975])
    return float(lo), float(hi)


def budgeted_speedup(alpha: float, gamma: int, new_tokens: int, c: float, verify_cost: np.ndarray,
                     block_probs: np.ndarray | None = None) -> float:
    """Speedup of a run that emits exactly new_tokens tokens, draft acceptance i.i.d. alpha.

    Dynamic programme over the tokens still to emit, n: an iteration drafts
    k = min(gamma, n - 1, b) tokens (the decoder never drafts past the budget; b is the
    drafter's proposal length, always >= gamma unless block_probs[b] gives its distribution,
    e.g. prompt lookup's teacher-forced one), accepts a of them with P(a) = alpha^a (1 - alpha)
    for a < k and alpha^k for a = k, emits a + 1 tokens and costs k c + v(k + 1) (in baseline
    token times, i.e. with the overheads folded in). Speedup = new_tokens / E(total time).
    For long runs and full blocks it tends to Eq. 1 / (gamma c + v(gamma + 1)).
    """
    alpha = min(max(alpha, 0.0), 1.0)
    if block_probs is None:
        block_probs = np.zeros(gamma + 1)
        block_probs[gamma] = 1.0
    blocks = np.arange(block_probs.shape[0])
    time_left = np.zeros(new_tokens + 1)  # E(time to emit n more tokens), n = 0..new_tokens
    for n in range(1, new_tokens + 1):
        room = min(gamma, n - 1)
        k_probs = np.bincount(np.minimum(blocks, room), weights=block_probs, minlength=room + 1)
        total = 0.0
        for k, w in enumerate(k_probs):
            if w == 0.0:
                continue
            a = np.arange(k + 1)
            p_a = alpha ** a * np.where(a < k, 1.0 - alpha, 1.0)  # [k + 1]
            step = float(iteration_time(k, c, verify_cost))
            total += w * (step + float((p_a * time_left[n - a - 1]).sum()))
        time_left[n] = total
    return float(new_tokens / time_left[new_tokens])


def replay_in_runs(alpha: AlphaEstimate, gamma: int, new_tokens: int) -> tuple[DecodeStats, np.ndarray]:
    """The temperature-0 replay over the first new_tokens positions of each of the estimator's
    sequences: the same budget and the same place after the prompt as the decodes (prompt
    lookup's acceptance grows with the text generated so far, so later windows would not
    represent the decodes)."""
    return replay([s.match[:new_tokens] for s in alpha.scores], [s.block[:new_tokens] for s in alpha.scores],
                  gamma, alpha.max_gamma)


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


def _run_decode(scorer: TargetScorer, drafter, prompt: list[int], new_tokens: int, gamma: int,
                sampling: SamplingConfig, seed: int) -> tuple[DecodeStats, list[int]]:
    gen = torch.Generator(device=scorer.device).manual_seed(seed)
    if drafter is None:
        return autoregressive_decode(scorer, prompt, new_tokens, sampling, gen).stats, []
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
    bar = tqdm(total=repeats * len(prompts) * len(configs), desc=f"decoding (T={sampling.temperature:g})",
               unit="run", disable=not progress, leave=False)
    turn = 0
    sweeps: list[TargetTiming] = []
    last_probe: float | None = None
    for r in range(repeats):
        for j, prompt in enumerate(prompts):
            run_seed = int(np.random.SeedSequence([seed, r, j]).generate_state(1)[0])
            order = configs[turn % len(configs):] + configs[:turn % len(configs)]
            turn += 1
            if sweep is not None:
                sweeps.append(run_undisturbed(sweep, retries, threshold)[0])
                last_probe = None  # the sweep took time: probe again before the next run
            for name, g in order:
                drafter = None if name == "baseline" else drafters[name]
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


@dataclass
class ValidationRow:
    """One (drafter, temperature, gamma) configuration: measured and predicted speedups."""

    drafter: str
    temperature: float
    gamma: int
    alpha_estimate: float
    alpha_ci: tuple[float, float]
    alpha_compared: str  # which estimator value the decode's alpha is compared with (`window_alpha`)
    alpha_compared_value: float
    alpha_compared_ci: tuple[float, float]
    alpha_decode: float
    alpha_decode_in_ci: bool  # the decode's alpha inside the estimator's 95% interval
    alpha_decode_ci: tuple[float, float]  # bootstrap over the decode runs (prompts x repeats)
    alpha_intervals_overlap: bool  # the two intervals overlap (both are sampling estimates)
    alpha_estimate_in_decode_ci: bool  # the estimator's alpha inside the decode's 95% interval
    alpha_difference_z: float  # (decode - estimate) / its standard error (`alpha_agreement_z`)
    alpha_per_position: list[float]  # DecodeStats.alpha_per_position (accepted / reached)
    alpha_survival: list[float]  # alpha'_i used by prediction (ii)
    tokens_per_iteration: float
    c: float
    v_gamma1: float  # v(gamma + 1)
    overhead_gamma: float  # o(gamma) in target steps
    measured: float  # wall clock: baseline seconds per token / speculative seconds per token
    measured_ci: tuple[float, float]  # bootstrap over the (prompt, repeat) runs
    measured_corrected: float | None  # the same in target steps of the moment (probe-normalised runs)
    measured_runs: list[float]  # per (prompt, repeat) speedups
    paper: float
    extended: float
    extended_estimated: float
    iteration_seconds_measured: float
    iteration_seconds_predicted: float
    verify_seconds_measured: float  # per iteration: target pass + sampling + verifier + commit (DecodeStats)
    verify_seconds_predicted: float  # mean of t(1) (v(k + 1) + o(k))
    draft_seconds_measured: float  # per iteration: propose + commit of the drafter (DecodeStats)
    draft_seconds_predicted: float  # mean of k c t(1)
    baseline_token_seconds_measured: float
    baseline_token_seconds_predicted: float

    @property
    def error_paper(self) -> float:
        return self.paper / self.measured - 1.0

    @property
    def error_extended(self) -> float:
        return self.extended / self.measured - 1.0

    @property
    def error_extended_estimated(self) -> float:
        return self.extended_estimated / self.measured - 1.0

    @property
    def extended_within_tolerance(self) -> bool:
        return abs(self.error_extended) <= TOLERANCE

    def _corrected_error(self, predicted: float) -> float | None:
        return None if self.measured_corrected is None else predicted / self.measured_corrected - 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        corrected = self._corrected_error(self.extended)
        d.update(error_paper=self.error_paper, error_extended=self.error_extended,
                 error_extended_estimated=self.error_extended_estimated,
                 extended_within_tolerance=self.extended_within_tolerance,
                 error_paper_corrected=self._corrected_error(self.paper), error_extended_corrected=corrected,
                 error_extended_estimated_corrected=self._corrected_error(self.extended_estimated),
                 extended_within_tolerance_corrected=None if corrected is None else abs(corrected) <= TOLERANCE,
                 measured_ci_covers_extended=self.measured_ci[0] <= self.extended <= self.measured_ci[1])
        return d


@dataclass
class ValidationResult:
    """Everything a validation run produced (JSON-ready through to_dict)."""

    config: ValidationConfig
    rows: list[ValidationRow]
    alphas: dict[tuple[str, float], AlphaEstimate]
    costs: dict[tuple[str, float], CostEstimate]
    plans: list[dict[str, Any]]
    timing: TargetTiming
    seconds: dict[str, float]
    machine: dict[str, Any]
    notes: dict[str, str]
    interference: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "machine": self.machine,
            "seconds": self.seconds,
            "alpha": [{"drafter": d, "temperature": t, **a.to_dict()} for (d, t), a in self.alphas.items()],
            "cost": [{"drafter": d, "temperature": t, **c.to_dict()} for (d, t), c in self.costs.items()],
            "verify_cost": self.timing.verify_cost,
            "target_step_seconds": self.timing.step_seconds,
            "context_tokens": self.timing.context_tokens,
            "plan": self.plans,
            "rows": [r.to_dict() for r in self.rows],
            "extended_within_tolerance": sum(r.extended_within_tolerance for r in self.rows),
            "extended_within_tolerance_corrected": sum(bool(r.to_dict()["extended_within_tolerance_corrected"])
                                                       for r in self.rows),
            "configurations": len(self.rows),
            "tolerance": TOLERANCE,
            "notes": self.notes,
            "interference": {
                "threshold_cores": self.config.interference_threshold,
                "decode_runs": sum(v["runs"] for v in self.interference.values()),
                "decode_attempts": sum(v["attempts"] for v in self.interference.values()),
                "still_disturbed": sum(v["still_disturbed"] for v in self.interference.values()),
                "max_load": max((v["max_load"] for v in self.interference.values()), default=0.0),
                "by_configuration": self.interference},
        }


def machine_info(device: torch.device) -> dict[str, Any]:
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "device": str(device)}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def predict_row(name: str, temperature: float, gamma: int, alpha: AlphaEstimate, cost: CostEstimate,
                runs: DecodeRuns, baseline: DecodeRuns, window: tuple[str, float, tuple[float, float]],
                rng: np.random.Generator | None = None) -> ValidationRow:
    """Measured speedup and the three predictions for one configuration (see the module doc).
    window: the estimator's alpha over the decoded stretch (`window_alpha`), computed once per
    drafter and temperature so every gamma row shows the same value and interval."""
    rng = rng if rng is not None else np.random.default_rng(0)
    stats = runs.stats
    new_tokens = runs.tokens // max(len(runs.per_run), 1)  # tokens per run
    base_token = baseline.seconds / baseline.tokens
    spec_token = runs.seconds / runs.tokens
    measured = base_token / spec_token
    per_run = [(b[0] / b[1]) / (r[0] / r[1]) for b, r in zip(baseline.per_run, runs.per_run)]
    corrected = None
    if runs.steps and baseline.steps:
        corrected = (baseline.step_seconds / baseline.tokens) / (runs.step_seconds / runs.tokens)
    measured_ci = paired_ratio_ci(baseline.per_run, runs.per_run, rng)
    accepted = np.array([r[2] for r in runs.per_run], dtype=np.float64)
    reached = np.array([r[3] for r in runs.per_run], dtype=np.float64)
    decode_ci = (bootstrap_ratio_ci(accepted[reached > 0], reached[reached > 0], rng)
                 if (reached > 0).any() else (float("nan"), float("nan")))
    c_eff, v_eff = effective_cost(cost)
    # (i) the paper's model
    paper = float(walltime_improvement(alpha.alpha, gamma, cost.c))
    # (ii) measured per-position acceptance + v(k) + c + overheads, over the recorded k's
    survival = survival_acceptance(stats)
    tokens = float(positional_expected_tokens(survival, gamma))
    k_hist = k_histogram(runs.lengths, gamma)
    extended = tokens / mean_iteration_time(k_hist, c_eff, v_eff)
    # (iii) acceptance from the estimator alone
    if temperature == 0 and all(s.match is not None for s in alpha.scores):
        replayed, est_hist = replay_in_runs(alpha, gamma, new_tokens)
        extended_estimated = replayed.tokens_per_iteration() / mean_iteration_time(est_hist, c_eff, v_eff)
    elif alpha.scores and all(s.block is not None for s in alpha.scores) and alpha.alpha_when_proposed is not None:
        block_probs = np.bincount(np.concatenate([s.block for s in alpha.scores])).astype(np.float64)
        extended_estimated = budgeted_speedup(alpha.alpha_when_proposed, gamma, new_tokens, c_eff, v_eff,
                                              block_probs / block_probs.sum())
    else:
        extended_estimated = budgeted_speedup(alpha.alpha, gamma, new_tokens, c_eff, v_eff)
    compared, compared_value, compared_ci = window
    decode_alpha = stats.alpha()
    step = cost.target.step_seconds
    base_steps = 1.0 + cost.overhead[0]  # predicted baseline time per token, in target steps
    iteration_predicted = mean_iteration_time(k_hist, c_eff, v_eff) * base_steps
    return ValidationRow(
        drafter=name, temperature=temperature, gamma=gamma, alpha_estimate=alpha.alpha, alpha_ci=alpha.alpha_ci,
        alpha_compared=compared, alpha_compared_value=compared_value, alpha_compared_ci=tuple(compared_ci),
        alpha_decode=decode_alpha, alpha_decode_in_ci=bool(compared_ci[0] <= decode_alpha <= compared_ci[1]),
        alpha_decode_ci=decode_ci,
        alpha_intervals_overlap=bool(decode_ci[0] <= compared_ci[1] and compared_ci[0] <= decode_ci[1]),
        alpha_estimate_in_decode_ci=bool(decode_ci[0] <= compared_value <= decode_ci[1]),
        alpha_difference_z=alpha_agreement_z(compared_value, compared_ci, decode_alpha, decode_ci),
        alpha_per_position=stats.alpha_per_position(), alpha_survival=survival,
        tokens_per_iteration=stats.tokens_per_iteration(), c=cost.c, v_gamma1=float(cost.verify_cost[gamma]),
        overhead_gamma=float(cost.overhead[gamma]), measured=measured, measured_ci=measured_ci,
        measured_corrected=corrected, measured_runs=per_run, paper=paper,
        extended=float(extended), extended_estimated=float(extended_estimated),
        iteration_seconds_measured=runs.seconds / stats.iterations,
        iteration_seconds_predicted=iteration_predicted * step,
        verify_seconds_measured=stats.time_verify / stats.iterations,
        verify_seconds_predicted=step * mean_iteration_time(k_hist, 0.0, v_eff) * base_steps,
        draft_seconds_measured=stats.time_draft / stats.iterations,
        draft_seconds_predicted=step * cost.c * float((k_hist * np.arange(gamma + 1)).sum() / k_hist.sum()),
        baseline_token_seconds_measured=base_token,
        baseline_token_seconds_predicted=step * base_steps)


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


def plan_entry(name: str, temperature: float, alpha: AlphaEstimate, cost: CostEstimate, max_gamma: int
               ) -> dict[str, Any]:
    """The simulator's plan for one (drafter, temperature): the best gamma under the paper's
    model (alpha, c, v == 1) and under the extended cost model (alpha i.i.d., c', v')."""
    a = min(alpha.alpha, 1.0 - 1e-9)  # the plan needs alpha < 1 (a drafter equal to the target)
    c_eff, v_eff = effective_cost(cost)
    paper = make_plan(c=cost.c, alpha=a, max_gamma=max_gamma)
    extended = make_plan(c=c_eff, alpha=a, max_gamma=max_gamma, verify_cost=v_eff)
    return {"drafter": name, "temperature": temperature, "alpha": alpha.alpha, "c": cost.c, "c_hat": cost.c_hat,
            "paper": {"optimal_gamma": paper.optimal_gamma,
                      "speedup": float(paper.walltime_improvement[paper.optimal_gamma])},
            "extended": {"optimal_gamma": extended.optimal_gamma,
                         "speedup": float(extended.walltime_improvement[extended.optimal_gamma])}}


NOTES = {
    "measured": "speedup = baseline decode seconds per token / speculative decode seconds per token, prefill "
                "excluded, summed over all prompts and repeats; EOS ignored (every run emits new_tokens tokens); "
                "[95% CI: bootstrap over runs]",
    "measured_corrected": "the same with each run's time divided by a one-token target step probed right before "
                          "and after it (target steps of that moment): removes the machine's speed drift",
    "paper": "(i) Theorem 8 with the estimator's teacher-forced alpha and the timed c; assumes v == 1 "
             "(gamma + 1 target evaluations in the time of one) and no loop overhead",
    "extended": "(ii) per-position acceptance measured in the decode (alpha'_i = accepted_i / accepted_(i-1), "
                "no-proposal = rejection) + timed c + measured verify-cost curve v(k) + measured loop overhead "
                "o(k), averaged over the proposal lengths the decode used; tests the cost model",
    "extended_estimated": "(iii) the extended cost model with acceptance from the estimator only: exact replay "
                          "of greedy decoding from teacher-forced blocks over the first new_tokens positions of "
                          "its samples at T = 0; at T > 0 i.i.d. alpha (Eq. 1) over runs of exactly new_tokens "
                          "tokens, for prompt lookup over its teacher-forced proposal lengths with "
                          "alpha_when_proposed",
    "alpha_decode": "DecodeStats.alpha() = accepted / reached draft positions over all positions 1..gamma; "
                    "compared with the estimator's alpha over the first new_tokens positions of its "
                    "continuations (alpha_when_proposed for prompt lookup) and its bootstrap interval over "
                    "prompts; the decode's own interval (bootstrap over its runs) is reported too, since its "
                    "few prompts make it the noisier of the two; z = (decode - estimate) / sqrt(se_est^2 + "
                    "se_dec^2) with each se = 95% half-width / 1.96: |z| <= 1.96 = agreement at the 5% level",
}


def run_validation(target, drafters: dict[str, Any], prompts: Sequence[Sequence[int]],
                   alpha_prompts: Sequence[Sequence[int]], config: ValidationConfig,
                   progress: bool = False) -> ValidationResult:
    """Estimate, decode and compare for every drafter, gamma and temperature.

    target: a `specdec.reference.core.models.LoadedModel` (model + vocab_size); drafters: name -> drafter
    object; prompts: the decode prompts; alpha_prompts: the estimator's prompts.
    """
    if not drafters:
        raise ValueError("validation needs at least one drafter")
    model = target.model
    device = model.device
    rng = np.random.default_rng(config.seed)
    seconds: dict[str, float] = {"alpha": 0.0, "cost": 0.0, "decode": 0.0}
    alphas: dict[tuple[str, float], AlphaEstimate] = {}
    costs: dict[tuple[str, float], CostEstimate] = {}
    rows: list[ValidationRow] = []
    plans: list[dict[str, Any]] = []
    timing: TargetTiming | None = None
    all_sweeps: list[TargetTiming] = []
    interference: dict[str, dict[str, Any]] = {}
    gamma_top = max(config.gammas)
    deterministic: dict[str, bool] = {}
    for ti, temperature in enumerate(config.temperatures):
        sampling = config.sampling(temperature)
        start = time.perf_counter()
        gen = torch.Generator(device=device).manual_seed(_seed(config.seed, ti, 1))
        samples = generate_continuations(model, alpha_prompts, config.alpha_new_tokens, sampling, gen,
                                         config.batch_size, progress)
        for name, drafter in drafters.items():
            alphas[(name, temperature)] = estimate_alpha(
                model, drafter, samples, target.vocab_size, rng, config.lenience, batch_size=8, max_gamma=gamma_top,
                n_boot=config.bootstrap,
                generator=torch.Generator(device=device).manual_seed(_seed(config.seed, ti, 2)),
                progress=progress)
            deterministic[name] = all(s.proposes_tokens for s in alphas[(name, temperature)].scores)
        seconds["alpha"] += time.perf_counter() - start
        start = time.perf_counter()
        context = samples.sequences()[0]
        retry = dict(retries=config.retries, threshold=config.interference_threshold)
        if timing is None:
            timing = run_undisturbed(lambda: time_target_passes(model, context, config.context, config.max_k,
                                                                config.timing_repeats), **retry)[0]
        overhead = run_undisturbed(lambda: loop_overhead(model, context, sampling, timing, config.max_k,
                                                         torch.Generator(device=device).manual_seed(0)), **retry)[0]
        drafts = {name: run_undisturbed(lambda d=drafter: time_draft_steps(
            d, context, sampling, config.context, gamma_top, config.draft_repeats,
            generator=torch.Generator(device=device).manual_seed(0), device=device), **retry)[0]
            for name, drafter in drafters.items()}
        seconds["cost"] += time.perf_counter() - start
        start = time.perf_counter()

        sweep_contexts = iter(config.sweep_contexts() * (config.repeats * len(prompts)))

        def sweep() -> TargetTiming:  # t(k) for the k's the decodes use, between decode blocks
            return time_target_passes(model, context, next(sweep_contexts), gamma_top + 1, config.sweep_repeats, 1)

        probe = TargetProbe(model, context, config.context) if config.probe else None
        runs, sweeps = measure_decodes(model, drafters, prompts, config.gammas, sampling, config.new_tokens,
                                       config.repeats, _seed(config.seed, ti, 3), progress,
                                       sweep if config.sweep_repeats else None, probe=probe, **retry)
        for (name, g), entry in runs.items():
            key = "baseline" if name == "baseline" else f"{name}/gamma={g}"
            interference[f"t={temperature:g} {key}"] = {
                "runs": len(entry.per_run), "attempts": entry.attempts,
                "max_load": max(entry.loads, default=0.0),
                "still_disturbed": sum(l > config.interference_threshold for l in entry.loads)}
        seconds["decode"] += time.perf_counter() - start
        pooled = pool_timings([timing, *sweeps])  # this temperature's v(k): up-front and in-between runs
        all_sweeps.extend(sweeps)
        for name, drafter in drafters.items():
            costs[(name, temperature)] = assemble_cost(drafter, model, pooled, drafts[name], overhead)
        for name in drafters:
            alpha, cost = alphas[(name, temperature)], costs[(name, temperature)]
            plans.append(plan_entry(name, temperature, alpha, cost, config.max_k - 1))
            window = window_alpha(alpha, config.new_tokens, deterministic[name], rng)
            for g in config.gammas:
                rows.append(predict_row(name, temperature, g, alpha, cost, runs[(name, g)],
                                        runs[("baseline", 0)], window, rng))
    pooled = pool_timings([timing, *all_sweeps]) if timing is not None else None
    return ValidationResult(config, rows, alphas, costs, plans, pooled, seconds, machine_info(device), dict(NOTES),
                            interference)
