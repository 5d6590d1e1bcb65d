"""Dynamic draft length in the validation (issue 52): every drafter also decodes under each
draft-length rule of `ValidationConfig.policies` (the confidence threshold, transformers'
heuristic schedule: `specdec.reference.core.policy`), through the same harness as its fixed
gammas (interleaved with the baseline, load checks, probes, the one speedup definition), and
each rule's measured speedup is set against the prediction of `specdec.simulator.dynamic` fed by
the estimator's joint law of (draft confidence, acceptance) at that temperature and the timed
costs (c', v'(k) with the loop overhead folded in, as prediction (ii)/(iii)). Nothing is fitted
to the decodes: the law and the costs are measured before them.

`threshold_decisions`: per (drafter, temperature) the threshold the prediction ranks first among
those decoded, against the measured best of them (regret, goal 3 %), and the best threshold's
measured speedup against the best fixed gamma's (the gain or loss of the rule)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from specdec.reference.core.policy import ConfidenceThreshold, HeuristicSchedule, parse_policy
from specdec.reference.core.stats import DecodeStats
from specdec.reference.estimate.alpha import AlphaEstimate
from specdec.reference.estimate.cost import CostEstimate
from specdec.reference.measure.harness import Run
from specdec.reference.measure.speedup import speedup
from specdec.reference.validation.config import TOLERANCE
from specdec.simulator.dynamic import confidence_law, heuristic_schedule, threshold_prediction
from specdec.simulator.prediction import effective_cost

REGRET_GOAL = 0.03


def policy_of(spelling: str, gamma: int):
    """A fresh policy object for `spelling` (each run of a rule gets its own state)."""
    return parse_policy(spelling, gamma)


def law_of(alpha: AlphaEstimate):
    """The estimator's joint law as `ConfidenceLaw`, per position where the estimate has it (None
    when the drafter reports no confidence)."""
    return confidence_law(alpha.confidence_law)


def predict_policy(policy, law, c: float | np.ndarray, verify_cost: np.ndarray) -> tuple[float, float, float]:
    """(speedup, tokens per iteration, drafts per iteration) of a rule under the law, in baseline
    token times (c, v already effective; c a number or c_1..c_n, the cost per forward of an
    iteration making k forwards: `simulator.dynamic.draft_curve`)."""
    if isinstance(policy, ConfidenceThreshold):
        p = threshold_prediction(law, [policy.tau], policy.n_min, policy.n_max, c, verify_cost, policy.keep_last)
        return float(p.speedup[0]), float(p.expected_tokens[0]), float(p.expected_drafts[0])
    if isinstance(policy, HeuristicSchedule):
        s = heuristic_schedule(law, c, verify_cost, cap=policy.n_max)
        drafts = float(sum(pi * threshold_prediction(law, [0.0], 0, n, c, verify_cost, True).expected_drafts[0]
                           for n, pi in enumerate(s.stationary, start=1)))
        return float(s.speedup), float(s.expected_tokens), drafts
    raise ValueError(f"no prediction for the rule {type(policy).__name__}")


@dataclass
class PolicyRow:
    """One (drafter, temperature, rule): measured and predicted."""

    drafter: str
    temperature: float
    policy: str  # the rule's spelling (`parse_policy`)
    tau: float | None  # the confidence threshold (None: the heuristic schedule)
    n_max: int
    c: float  # timed c at n_max drafts, in target steps
    c_by_forwards: tuple[float, ...]  # c timed at k = 1..n_max drafts (what the prediction prices k forwards at)
    measured: float
    measured_ci: tuple[float, float]
    measured_corrected: float | None
    predicted: float  # specdec.simulator.dynamic from the estimator's law and the timed costs
    tokens_per_iteration: float  # measured
    tokens_per_iteration_predicted: float
    drafts_per_iteration: float  # measured
    drafts_per_iteration_predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def within_tolerance(self) -> bool:
        return abs(self.error) <= TOLERANCE

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error": self.error, "within_tolerance": self.within_tolerance}


def policy_row(name: str, temperature: float, spelling: str, policy, alpha: AlphaEstimate, cost: CostEstimate,
               c_by_forwards: Sequence[float], runs: Sequence[Run], baseline: Sequence[Run], rng: np.random.Generator
               ) -> PolicyRow | None:
    """The row of one rule (None when the drafter has no confidence law to predict from). cost: the
    costs timed at the rule's n_max (v, the loop overhead); c_by_forwards: c timed at k = 1..n_max
    drafts, as each fixed gamma is priced at its own (a drafter's fixed cost per iteration, the
    commit and the first step, spread over more forwards costs less per forward)."""
    law = law_of(alpha)
    if law is None:
        return None
    c_eff, v_eff = effective_cost(np.asarray(c_by_forwards, dtype=np.float64), cost.verify_cost, cost.overhead)
    predicted, tokens, drafts = predict_policy(policy, law, c_eff, np.asarray(v_eff))
    measured = speedup(baseline, runs, rng)
    stats = DecodeStats.total([r.stats for r in runs])
    hist = np.asarray(stats.proposed_hist, dtype=np.float64)
    tau = policy.tau if isinstance(policy, ConfidenceThreshold) else None
    return PolicyRow(name, temperature, spelling, tau, policy.k_max, cost.c, tuple(float(x) for x in c_by_forwards),
                     measured.speedup, tuple(measured.ci), measured.corrected, predicted,
                     stats.tokens_per_iteration(), tokens, float((hist * np.arange(hist.size)).sum() / max(hist.sum(), 1.0)), drafts)


@dataclass(frozen=True)
class ThresholdDecision:
    """Per (drafter, temperature): the threshold the prediction ranks first among those decoded
    vs the measured best (regret = 1 - measured(pick) / measured(best)), and the best measured
    threshold against the best measured fixed gamma (gain = ratio - 1)."""

    drafter: str
    temperature: float
    pick: str
    pick_predicted: float
    pick_measured: float
    best: str
    best_measured: float
    fixed_best: str | None
    fixed_best_measured: float | None

    @property
    def regret(self) -> float:
        return 1.0 - self.pick_measured / self.best_measured

    @property
    def gain(self) -> float | None:
        return None if self.fixed_best_measured is None else self.best_measured / self.fixed_best_measured - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "regret": self.regret, "within_goal": self.regret <= REGRET_GOAL, "gain": self.gain}


def threshold_decisions(policy_rows: Sequence[PolicyRow], fixed_rows: Sequence[Any]) -> list[ThresholdDecision]:
    """`ThresholdDecision` per (drafter, temperature) with at least one threshold row; fixed_rows:
    the validation's `ValidationRow`s (drafter, temperature, gamma, measured)."""
    out = []
    for key in dict.fromkeys((r.drafter, r.temperature) for r in policy_rows if r.tau is not None):
        rows = [r for r in policy_rows if (r.drafter, r.temperature) == key and r.tau is not None]
        pick = max(rows, key=lambda r: r.predicted)
        best = max(rows, key=lambda r: r.measured)
        fixed = [r for r in fixed_rows if (r.drafter, r.temperature) == key]
        top = max(fixed, key=lambda r: r.measured, default=None)
        out.append(ThresholdDecision(key[0], key[1], pick.policy, pick.predicted, pick.measured, best.policy,
                                     best.measured, None if top is None else f"gamma={top.gamma}",
                                     None if top is None else top.measured))
    return out


def policy_table(rows: Sequence[PolicyRow]) -> str:
    lines = ["| drafter | T | rule | measured (95% CI) | corrected | predicted | error | tokens/iter meas. / pred. | "
             "drafts/iter meas. / pred. |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        corrected = "-" if r.measured_corrected is None else f"{r.measured_corrected:.2f}x"
        flag = "" if r.within_tolerance else " (miss)"
        lines.append(f"| {r.drafter} | {r.temperature:g} | {r.policy} | {r.measured:.2f}x [{r.measured_ci[0]:.2f}, "
                     f"{r.measured_ci[1]:.2f}] | {corrected} | {r.predicted:.2f}x | {100 * r.error:+.1f}%{flag} | "
                     f"{r.tokens_per_iteration:.2f} / {r.tokens_per_iteration_predicted:.2f} | "
                     f"{r.drafts_per_iteration:.2f} / {r.drafts_per_iteration_predicted:.2f} |")
    return "\n".join(lines)


def decision_table(decisions: Sequence[ThresholdDecision]) -> str:
    lines = ["| drafter | T | predicted best threshold | predicted | measured | measured best | measured | regret | "
             "best fixed gamma | measured | threshold's gain |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in decisions:
        flag = "" if d.regret <= REGRET_GOAL else " (over the goal)"
        fixed = "-" if d.fixed_best is None else d.fixed_best
        fixed_m = "-" if d.fixed_best_measured is None else f"{d.fixed_best_measured:.2f}x"
        gain = "-" if d.gain is None else f"{100 * d.gain:+.1f}%"
        lines.append(f"| {d.drafter} | {d.temperature:g} | {d.pick} | {d.pick_predicted:.2f}x | {d.pick_measured:.2f}x | "
                     f"{d.best} | {d.best_measured:.2f}x | {100 * d.regret:+.1f}%{flag} | {fixed} | {fixed_m} | {gain} |")
    return "\n".join(lines)


def policy_report(rows: Sequence[PolicyRow], decisions: Sequence[ThresholdDecision]) -> str:
    held = sum(r.within_tolerance for r in rows)
    return ("### Dynamic draft length: measured vs predicted (simulator.dynamic from the estimator's confidence law)\n\n"
            + policy_table(rows) + f"\n\nwithin {100 * TOLERANCE:.0f}%: {held}/{len(rows)}\n\n"
            + "### The threshold the prediction ranks first, and the gain over the best fixed gamma\n\n"
            + decision_table(decisions))
