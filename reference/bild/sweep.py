"""Speed and quality of decoding methods on a set of prompts: BiLD's trade-off (Fig. 4/5).
A `Method` is the baseline ("ar"), exact speculative decoding ("sd", gamma) or BiLD ("bild",
a policy); `evaluate` stores counts, `tradeoff_row` derives the numbers a figure plots.
Clocks, repeats and fairness between methods: docs/bild.md.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Sequence

import torch

from specdec.reference.bild.policy import BildPolicy, bild_decode
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.drafters.protocol import Drafter
from specdec.reference.bild.quality import Agreement, TargetFit, greedy_agreement, target_fit
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.target import TargetScorer


@dataclass(frozen=True)
class Method:
    """kind: "ar" (baseline), "sd" (exact speculative decoding, gamma) or "bild" (policy)."""

    kind: str
    gamma: int = 0
    policy: BildPolicy | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("ar", "sd", "bild"):
            raise ValueError(f"unknown method kind {self.kind!r}: ar, sd or bild")
        if self.kind == "sd" and self.gamma < 1:
            raise ValueError(f"speculative decoding needs gamma >= 1, got {self.gamma}")
        if self.kind == "bild" and self.policy is None:
            raise ValueError("a bild method needs a policy")

    @property
    def family(self) -> str:
        """Which curve the method belongs to in the trade-off figure."""
        if self.kind != "bild":
            return {"ar": "autoregressive", "sd": "speculative (exact)"}[self.kind]
        p = self.policy
        if p.fallback == 0:
            return f"BiLD no fallback (RB {p.rollback_label()})"
        if p.rollback == "argmax":
            return "BiLD RB argmax"
        if math.isinf(p.rollback):
            return "BiLD no rollback"
        return f"BiLD RB {p.rollback_label()}"

    @property
    def label(self) -> str:
        if self.kind == "ar":
            return "autoregressive"
        if self.kind == "sd":
            return f"SD gamma={self.gamma}"
        p = self.policy
        return f"BiLD FB={p.fallback:g} RB={p.rollback_label()} max={p.max_little_steps}"


@dataclass
class MethodResult:
    """Counts of one method over a set of prompts."""

    method: Method
    new_tokens: int = 0
    seconds: list[float] = field(default_factory=list)  # [prompts] wall time of each decode
    cpu_seconds: list[float] = field(default_factory=list)  # [prompts] CPU time of each decode
    target_passes: int = 0
    little_kept: int = 0  # drafted tokens in the output (BiLD: little tokens; SD: accepted drafts)
    rollbacks: int = 0  # BiLD: passes that rolled back; SD: passes that rejected a draft
    agreement: Agreement = field(default_factory=Agreement)
    fit: TargetFit = field(default_factory=TargetFit)
    outputs: list[list[int]] = field(default_factory=list)


    def fastest(self, other: "MethodResult") -> "MethodResult":
        """This result with each prompt's times replaced by the faster of two identical runs."""
        if other.method != self.method or other.outputs != self.outputs:
            raise ValueError(f"{self.method.label}: the two runs differ, so their times cannot be pooled")
        return replace(self, seconds=[min(a, b) for a, b in zip(self.seconds, other.seconds)],
                       cpu_seconds=[min(a, b) for a, b in zip(self.cpu_seconds, other.cpu_seconds)])


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def evaluate(method: Method, target: TargetScorer, drafter: Drafter | None, prompts: Sequence[Sequence[int]],
             references: Sequence[Sequence[int]] | None, max_new_tokens: int, sampling: SamplingConfig,
             seed: int = 0, eos_id: int | None = None) -> MethodResult:
    """Run `method` on every prompt; compare with `references` (the target's greedy outputs).

    references=None compares each output with itself (use it for the greedy baseline that
    produces the references).
    """
    if method.kind != "ar" and drafter is None:
        raise ValueError(f"{method.label} needs a drafter")
    model = target.model
    device = target.device
    res = MethodResult(method)
    for i, prompt in enumerate(prompts):
        gen = _generator(device, seed)
        cpu_start = time.process_time()
        if method.kind == "ar":
            r = autoregressive_decode(target, prompt, max_new_tokens, sampling, gen, eos_id)
        elif method.kind == "sd":
            r = speculative_decode(target, drafter, prompt, max_new_tokens, method.gamma, sampling, gen, eos_id)
        else:
            r = bild_decode(target, drafter, prompt, max_new_tokens, method.policy, sampling, gen, eos_id)
        s = r.stats
        res.cpu_seconds.append(time.process_time() - cpu_start)
        res.new_tokens += s.new_tokens
        res.seconds.append(s.time_total)
        res.target_passes += s.target_passes
        res.little_kept += sum(r.from_drafter)
        res.rollbacks += s.rejections()  # SD: passes with a rejection
        res.agreement += greedy_agreement(r.tokens, r.tokens if references is None else references[i])
        res.fit += target_fit(model, prompt, r.tokens)
        res.outputs.append(r.tokens)
    return res


def warm_up(target: TargetScorer, drafter: Drafter | None, prompt: Sequence[int], sampling: SamplingConfig,
            tokens: int = 8) -> None:
    """Run each code path once, untimed, so first-call allocations do not count against one method."""
    gen = _generator(target.device, 0)
    autoregressive_decode(target, prompt, tokens, sampling, gen)
    if drafter is not None:
        speculative_decode(target, drafter, prompt, tokens, 2, sampling, gen)
        bild_decode(target, drafter, prompt, tokens, BildPolicy(0.0, 1.0, 4), sampling, gen)


def tradeoff_row(result: MethodResult, baseline: MethodResult) -> dict:
    """Derived numbers for one method, JSON-ready (what figures.bild plots)."""
    def per_token(r: MethodResult, seconds: list[float]) -> float:
        return sum(seconds) / r.new_tokens if r.new_tokens and sum(seconds) > 0 else float("nan")

    m = result.method
    wall, base_wall = per_token(result, result.seconds), per_token(baseline, baseline.seconds)
    cpu, base_cpu = per_token(result, result.cpu_seconds), per_token(baseline, baseline.cpu_seconds)
    row = {"kind": m.kind, "family": m.family, "label": m.label, "gamma": m.gamma if m.kind == "sd" else None,
           "fallback": m.policy.fallback if m.policy else None,
           "rollback": m.policy.rollback_label() if m.policy else None,
           "max_little_steps": m.policy.max_little_steps if m.policy else None,
           "prompts": result.agreement.prompts, "new_tokens": result.new_tokens, "seconds": sum(result.seconds),
           "cpu_seconds": sum(result.cpu_seconds),
           "target_passes": result.target_passes, "little_kept": result.little_kept,
           "rollbacks": result.rollbacks,
           "speedup": base_wall / wall, "latency_ratio": wall / base_wall, "speedup_cpu": base_cpu / cpu,
           "tokens_per_pass": result.new_tokens / result.target_passes if result.target_passes else float("nan"),
           "little_fraction": result.little_kept / result.new_tokens if result.new_tokens else float("nan"),
           "match_rate": result.agreement.match_rate(), "mean_prefix": result.agreement.mean_prefix(),
           "mean_log_likelihood": result.fit.mean_log_likelihood(), "argmax_rate": result.fit.argmax_rate(),
           "outputs": result.outputs}
    return row


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
    return methods


def run_sweep(target: TargetScorer, drafter: Drafter | None, prompts: Sequence[Sequence[int]],
              methods: Sequence[Method], max_new_tokens: int, sampling: SamplingConfig, seed: int = 0,
              eos_id: int | None = None, repeats: int = 1, progress=None) -> list[dict]:
    """Trade-off rows for the greedy baseline and every method, baseline first.

    Each pass runs the greedy autoregressive baseline, then every method, then the
    baseline again; passes alternate the methods' order (forward, backward, ...), so a slow
    drift of the machine's speed hits early and late methods alike. With repeats > 1 the
    time kept per (method, prompt) is the fastest of its runs: other jobs only ever slow
    a run down. The first baseline run's outputs are the greedy references.
    `progress(label)` is called before each run, if given.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    greedy = SamplingConfig(temperature=0.0)
    warm_up(target, drafter, prompts[0], sampling)
    baseline = evaluate(Method("ar"), target, None, prompts, None, max_new_tokens, greedy, seed, eos_id)
    references = baseline.outputs
    results: dict[Method, MethodResult] = {}
    for rep in range(repeats):
        for method in (methods if rep % 2 == 0 else methods[::-1]):
            if progress is not None:
                progress(method.label)
            r = evaluate(method, target, drafter, prompts, references, max_new_tokens, sampling, seed, eos_id)
            results[method] = results[method].fastest(r) if method in results else r
        baseline = baseline.fastest(evaluate(Method("ar"), target, None, prompts, references, max_new_tokens,
                                             greedy, seed, eos_id))
    return [tradeoff_row(r, baseline) for r in [baseline, *(results[m] for m in methods)]]
