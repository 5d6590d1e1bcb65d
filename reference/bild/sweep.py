"""Speed and quality of decoding methods on a set of prompts: BiLD's trade-off (Fig. 4/5).
A `Method` is the baseline ("ar"), exact speculative decoding ("sd", gamma) or BiLD ("bild",
a policy); they run through the one comparison harness (`specdec.reference.measure`),
`summarize` stores counts of their runs, `tradeoff_row` derives the numbers a figure plots
(the speedup is the harness's: prefill excluded). Clocks, repeats and fairness: docs/bild.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from specdec.errors import SpecdecError
from specdec.reference.bild.policy import BildPolicy, BildRollback, check_fallback
from specdec.reference.bild.quality import Agreement, TargetFit, greedy_agreement, target_fit
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.protocol import Drafter
from specdec.reference.measure.harness import Decoding, Run, baseline, fastest, measure
from specdec.reference.measure.speedup import speedup


@dataclass(frozen=True)
class Method:
    """kind: "ar" (baseline), "sd" (exact speculative decoding, gamma) or "bild" (policy)."""

    kind: str
    gamma: int = 0
    policy: BildPolicy | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("ar", "sd", "bild"):
            raise SpecdecError(f"unknown method kind {self.kind!r}: ar, sd or bild")
        if self.kind == "sd" and self.gamma < 1:
            raise SpecdecError(f"speculative decoding needs gamma >= 1, got {self.gamma}")
        if self.kind == "bild" and self.policy is None:
            raise SpecdecError("a bild method needs a policy")

    @property
    def family(self) -> str:
        """Which curve the method belongs to in the trade-off figure."""
        if self.kind != "bild":
            return {"ar": "autoregressive", "sd": "speculative (exact)"}[self.kind]
        policy = self.policy
        if policy.fallback == 0:
            return f"BiLD no fallback (RB {policy.rollback_label()})"
        if policy.rollback == "argmax":
            return "BiLD RB argmax"
        if math.isinf(policy.rollback):
            return "BiLD no rollback"
        return f"BiLD RB {policy.rollback_label()}"

    @property
    def label(self) -> str:
        if self.kind == "ar":
            return "autoregressive"
        if self.kind == "sd":
            return f"SD gamma={self.gamma}"
        policy = self.policy
        return f"BiLD FB={policy.fallback:g} RB={policy.rollback_label()} max={policy.max_little_steps}"

    def decoding(self, drafter: Drafter | None, sampling: SamplingConfig | None = None) -> Decoding:
        """The harness's method: the baseline, Algorithm 1 at gamma, or BiLD's rule (the little
        model drafts at most max_little_steps tokens a pass, stopping early on its fallback)."""
        if self.kind == "ar":
            return baseline(sampling, self.label)
        if drafter is None:
            raise SpecdecError(f"{self.label} needs a drafter")
        if self.kind == "sd":
            return Decoding(self.label, drafter, self.gamma, sampling=sampling)
        check_fallback(self.policy, drafter)
        if drafter.tree:
            raise SpecdecError(f"{type(drafter).__name__} proposes token trees: BiLD's rule takes one draft a pass")
        return Decoding(self.label, drafter, self.policy.draft_policy, BildRollback(self.policy), sampling)


@dataclass
class MethodResult:
    """Counts of one method over a set of prompts, and the runs they come from."""

    method: Method
    runs: list[Run] = field(default_factory=list)  # one per prompt, in prompt order
    new_tokens: int = 0
    target_passes: int = 0
    little_kept: int = 0  # drafted tokens in the output (BiLD: little tokens; SD: accepted drafts)
    rollbacks: int = 0  # BiLD: passes that rolled back; SD: passes that rejected a draft
    agreement: Agreement = field(default_factory=Agreement)
    fit: TargetFit = field(default_factory=TargetFit)

    @property
    def outputs(self) -> list[list[int]]:
        return [r.output for r in self.runs]


def summarize(method: Method, runs: Sequence[Run], model, prompts: Sequence[Sequence[int]],
              references: Sequence[Sequence[int]] | None) -> MethodResult:
    """Counts of `method`'s runs (one per prompt, in order), compared with `references` (the
    target's greedy outputs; None compares each output with itself)."""
    res = MethodResult(method, list(runs))
    for run, prompt in zip(runs, prompts):
        s = run.stats
        res.new_tokens += s.new_tokens
        res.target_passes += s.target_passes
        res.little_kept += sum(run.result.from_drafter)
        res.rollbacks += s.rejections()  # SD: passes with a rejection
        res.agreement += greedy_agreement(run.output, run.output if references is None else references[run.prompt])
        res.fit += target_fit(model, prompt, run.output)
    return res


def tradeoff_row(result: MethodResult, baseline: MethodResult) -> dict:
    """Derived numbers for one method, JSON-ready (what figures.bild plots); the speedups are the
    harness's measured speedup on the wall clock and on this process's CPU time."""
    wall = speedup(baseline.runs, result.runs)
    cpu = speedup(baseline.runs, result.runs, clock="cpu")
    m = result.method
    return {"kind": m.kind, "family": m.family, "label": m.label, "gamma": m.gamma if m.kind == "sd" else None,
            "fallback": m.policy.fallback if m.policy else None,
            "rollback": m.policy.rollback_label() if m.policy else None,
            "max_little_steps": m.policy.max_little_steps if m.policy else None,
            "prompts": result.agreement.prompts, "new_tokens": result.new_tokens, "seconds": wall.seconds[1],
            "prefill_seconds": wall.prefill_seconds[1], "cpu_seconds": cpu.seconds[1],
            "target_passes": result.target_passes, "little_kept": result.little_kept, "rollbacks": result.rollbacks,
            "speedup": wall.speedup, "speedup_ci": list(wall.ci), "latency_ratio": 1.0 / wall.speedup,
            "speedup_cpu": cpu.speedup,
            "tokens_per_pass": result.new_tokens / result.target_passes if result.target_passes else float("nan"),
            "little_fraction": result.little_kept / result.new_tokens if result.new_tokens else float("nan"),
            "match_rate": result.agreement.match_rate(), "mean_prefix": result.agreement.mean_prefix(),
            "mean_log_likelihood": result.fit.mean_log_likelihood(), "argmax_rate": result.fit.argmax_rate(),
            "outputs": result.outputs}


def sweep_methods(fallbacks: Sequence[float], rollbacks: Sequence[float | str], gammas: Sequence[int],
                  handovers: Sequence[int], max_little_steps: int = 10,
                  no_fallback_rollback: float | str | None = None) -> list[Method]:
    """The methods of a trade-off sweep (the baseline not included).

    BiLD for every (fallback, rollback) pair; rollback inf is the no-rollback ablation.
    The no-fallback ablation hands over every h in `handovers` tokens (fallback 0,
    max_little_steps h) with rollback `no_fallback_rollback` (default: the median finite
    rollback threshold). Exact speculative decoding for every gamma.
    """
    methods = [Method("bild", policy=BildPolicy(fb, rb, max_little_steps)) for rb in rollbacks for fb in fallbacks]
    if handovers:
        if no_fallback_rollback is None:
            finite = sorted(r for r in rollbacks if r != "argmax" and not math.isinf(r))
            no_fallback_rollback = finite[len(finite) // 2] if finite else math.inf
        methods += [Method("bild", policy=BildPolicy(0.0, no_fallback_rollback, h)) for h in handovers]
    methods += [Method("sd", gamma=g) for g in gammas]
    return list(dict.fromkeys(methods))  # a no-fallback ablation may repeat a (fallback 0) pair


def run_sweep(target: TargetScorer, drafter: Drafter | None, prompts: Sequence[Sequence[int]],
              methods: Sequence[Method], max_new_tokens: int, sampling: SamplingConfig, seed: int = 0,
              eos_id: int | None = None, repeats: int = 1, progress: Callable[[Run], None] | None = None
              ) -> list[dict]:
    """Trade-off rows for the greedy baseline and every method, baseline first.

    Every method and the greedy autoregressive baseline run through the harness, interleaved
    per prompt (`specdec.reference.measure.harness.measure`), after one untimed warm-up each;
    every prompt's generator is seeded with `seed`. With repeats > 1 the time kept per
    (method, prompt) is the fastest of its runs: other jobs only ever slow a run down. The
    baseline's outputs are the greedy references. `progress(run)` is called after each run.
    """
    greedy = SamplingConfig(temperature=0.0)
    ar = Method("ar")
    decodings = [ar.decoding(None, greedy)] + [m.decoding(drafter, sampling) for m in methods]
    runs = measure(decodings, target, prompts, max_new_tokens, sampling, repeats=repeats, seeds=lambda r, j: seed,
                   eos_id=eos_id, warm_up=8, progress=progress)
    base_runs = fastest(runs[decodings[0].name])
    references = [r.output for r in base_runs]
    base = summarize(ar, base_runs, target.model, prompts, None)
    results = [summarize(m, fastest(runs[d.name]), target.model, prompts, references)
               for m, d in zip(methods, decodings[1:])]
    return [tradeoff_row(r, base) for r in [base, *results]]
