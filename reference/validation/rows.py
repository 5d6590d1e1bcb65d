"""Typed results of a validation: one row per (drafter, temperature, gamma), the plan per
(drafter, temperature), and the whole run; each column's meaning next to its field, the
longer notes in NOTES (written into validation.json)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from specdec.reference.estimate.alpha import AlphaEstimate
from specdec.reference.estimate.cost import CostEstimate
from specdec.reference.estimate.timing import TargetTiming
from specdec.reference.validation.config import COST_TOLERANCE, TOLERANCE, ValidationConfig

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
    "extended_estimated": "(iii) the extended cost model with acceptance from the estimator only: the replay "
                          "along the first new_tokens positions of its samples (exact at T = 0, expected counts "
                          "at T > 0: the acceptance of each draft along the target's own sequence); i.i.d. alpha "
                          "(Eq. 1) over runs of exactly new_tokens tokens for a drafter whose deeper drafts "
                          "teacher forcing does not see",
    "alpha_decode": "DecodeStats.alpha() = accepted / reached draft positions over all positions 1..gamma; "
                    "compared with the estimator's alpha over the first new_tokens positions of its "
                    "continuations (alpha_when_proposed for prompt lookup) and its bootstrap interval over "
                    "prompts; the decode's own interval (bootstrap over its runs) is reported too, since its "
                    "few prompts make it the noisier of the two; z = (decode - estimate) / sqrt(se_est^2 + "
                    "se_dec^2) with each se = 95% half-width / 1.96: |z| <= 1.96 = agreement at the 5% level",
}



@dataclass(frozen=True)
class PlanEntry:
    """The simulator's best gamma for one (drafter, temperature) under each cost model."""

    drafter: str
    temperature: float
    alpha: float  # the estimator's teacher-forced alpha
    c: float
    c_hat: float
    paper_gamma: int  # Theorem 8: alpha, c, v == 1
    paper_speedup: float
    extended_gamma: int  # alpha i.i.d., c' and v'(k) with the measured loop overhead folded in
    extended_speedup: float

    def to_dict(self) -> dict[str, Any]:
        return {"drafter": self.drafter, "temperature": self.temperature, "alpha": self.alpha, "c": self.c,
                "c_hat": self.c_hat,
                "paper": {"optimal_gamma": self.paper_gamma, "speedup": self.paper_speedup},
                "extended": {"optimal_gamma": self.extended_gamma, "speedup": self.extended_speedup}}


COST_PARTS = ("pass", "after_pass", "draft")  # the keys of ValidationRow.cost_parts_steps, in an iteration's order


def configuration_key(temperature: float, name: str, gamma: int | str) -> str:
    """A configuration's key in `ValidationResult.interference` ("baseline" for the baseline)."""
    return f"t={temperature:g} " + ("baseline" if name == "baseline" else f"{name}/gamma={gamma}")


def priced_step(iteration_seconds: float, iteration_steps: float | None) -> float | None:
    """The t(1) a prediction is priced at: its iteration in seconds over the same in t(1)."""
    return iteration_seconds / iteration_steps if iteration_steps else None


def probe_range(seconds: Sequence[float | None]) -> list[float] | None:
    """[least, median, most] of the one-token probes around a configuration's runs (None without
    probes): how far the machine's own speed moved while they ran."""
    kept = [s for s in seconds if s is not None]
    return [min(kept), float(np.median(kept)), max(kept)] if kept else None


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
    # the same in target steps of each run's moment (each run's seconds / its probed t(1)); None without probes
    iteration_steps_measured: float | None = None
    iteration_steps_predicted: float | None = None  # mean of c k + v(k + 1) + o(k), in t(1)
    baseline_token_steps_measured: float | None = None
    # the iteration in its parts, in target steps of each run's moment, [measured, predicted] each: "pass" (the
    # target's passes, their tail and what a drafting cycle costs the next one), "after_pass" (the rule, the
    # commit, the bookkeeping), "draft" (propose + commit); None without probes or without o(k) timed in parts
    cost_parts_steps: dict[str, list[float]] | None = None

    @property
    def cost_error(self) -> float:
        """The cost model's error: iteration seconds measured / predicted - 1."""
        return self.iteration_seconds_measured / self.iteration_seconds_predicted - 1.0

    @property
    def cost_error_steps(self) -> float | None:
        """The same in target steps of each run's moment (the machine's drift removed)."""
        if self.iteration_steps_measured is None or not self.iteration_steps_predicted:
            return None
        return self.iteration_steps_measured / self.iteration_steps_predicted - 1.0

    @property
    def priced_step_seconds(self) -> float | None:
        """The t(1) this configuration's prediction is priced at."""
        return priced_step(self.iteration_seconds_predicted, self.iteration_steps_predicted)

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

    def corrected_error(self, predicted: float) -> float | None:
        """predicted / the drift-corrected measured speedup - 1 (None when the run did not probe)."""
        return None if self.measured_corrected is None else predicted / self.measured_corrected - 1.0

    @property
    def extended_within_tolerance_corrected(self) -> bool | None:
        error = self.corrected_error(self.extended)
        return None if error is None else abs(error) <= TOLERANCE

    @property
    def measured_ci_covers_extended(self) -> bool:
        return self.measured_ci[0] <= self.extended <= self.measured_ci[1]

    @property
    def measured_best(self) -> float:
        """The drift-corrected measured speedup when the run probed it, else the wall-clock one."""
        return self.measured if self.measured_corrected is None else self.measured_corrected

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(error_paper=self.error_paper, error_extended=self.error_extended,
                 error_extended_estimated=self.error_extended_estimated,
                 extended_within_tolerance=self.extended_within_tolerance,
                 error_paper_corrected=self.corrected_error(self.paper),
                 error_extended_corrected=self.corrected_error(self.extended),
                 error_extended_estimated_corrected=self.corrected_error(self.extended_estimated),
                 extended_within_tolerance_corrected=self.extended_within_tolerance_corrected,
                 measured_ci_covers_extended=self.measured_ci_covers_extended,
                 cost_error=self.cost_error, cost_error_steps=self.cost_error_steps)
        return d


@dataclass
class ValidationResult:
    """Everything a validation run produced (JSON-ready through to_dict)."""

    config: ValidationConfig
    rows: list[ValidationRow]
    alphas: dict[tuple[str, float], AlphaEstimate]
    costs: dict[tuple[str, float], CostEstimate]
    plans: list[PlanEntry]
    timing: TargetTiming
    seconds: dict[str, float]
    machine: dict[str, Any]
    notes: dict[str, str]
    interference: dict[str, dict[str, Any]] = field(default_factory=dict)
    target: str = "target"  # the target's name in the tables
    drafters: dict[str, str] = field(default_factory=dict)  # label -> drafter spec
    category: str | None = None  # the prompts' category (a workload, or a file's category field)
    policy_rows: list = field(default_factory=list)  # `specdec.reference.validation.dynamic.PolicyRow`s

    def interference_summary(self) -> dict[str, Any]:
        """Decode runs redone for foreign load, summed over configurations; probe_seconds: the
        one-token probe around the runs, [least, the configurations' medians' median, most]."""
        v = self.interference.values()
        probes = [x["probe_seconds"] for x in v if x.get("probe_seconds")]
        return {"threshold_cores": self.config.interference_threshold, "decode_runs": sum(x["runs"] for x in v),
                "decode_attempts": sum(x["attempts"] for x in v),
                "still_disturbed": sum(x["still_disturbed"] for x in v),
                "max_load": max((x["max_load"] for x in v), default=0.0),
                "probe_seconds": [min(p[0] for p in probes), float(np.median([p[1] for p in probes])),
                                  max(p[2] for p in probes)] if probes else None,
                "by_configuration": self.interference}

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
            "plan": [p.to_dict() for p in self.plans],
            "rows": [r.to_dict() for r in self.rows],
            "extended_within_tolerance": sum(r.extended_within_tolerance for r in self.rows),
            "extended_within_tolerance_corrected": sum(bool(r.extended_within_tolerance_corrected)
                                                       for r in self.rows),
            "configurations": len(self.rows),
            "tolerance": TOLERANCE,
            "cost_tolerance": COST_TOLERANCE,
            "notes": self.notes,
            "interference": self.interference_summary(),
            "target": self.target,
            "drafters": self.drafters,
            "category": self.category,
            **(self._policy_dict() if self.policy_rows else {}),
        }

    def _policy_dict(self) -> dict[str, Any]:
        from specdec.reference.validation.dynamic import threshold_decisions

        return {"policy_rows": [r.to_dict() for r in self.policy_rows],
                "policy_within_tolerance": sum(r.within_tolerance for r in self.policy_rows),
                "policy_decisions": [d.to_dict() for d in threshold_decisions(self.policy_rows, self.rows)]}
