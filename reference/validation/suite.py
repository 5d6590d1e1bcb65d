"""A validation over several prompt categories: one `ValidationResult` per category, the
Spec-Bench-layout table (methods as rows, categories as columns) and the decisions the plan
makes from the estimator alone, with their regret against the measured best."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specdec.reference.validation.rows import ValidationResult, ValidationRow
from specdec.reference.validation.config import COST_TOLERANCE, TOLERANCE

REGRET_GOAL = 0.03  # the plan's pick should be the measured best or within 3% of it


@dataclass(frozen=True)
class Decision:
    """What the plan picks for one (category, temperature) from the estimator alone (prediction
    (iii), extended_estimated: the drafter and gamma, or no speculation when nothing is predicted
    above 1), against the measured best of the grid (or plain decoding, 1.0).
    regret = 1 - measured(pick) / measured(best)."""

    category: str
    temperature: float
    pick: str | None  # "drafter/gamma=g", None: do not speculate
    pick_predicted: float
    pick_measured: float
    best: str | None
    best_measured: float

    @property
    def regret(self) -> float:
        return 1.0 - self.pick_measured / self.best_measured

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "temperature": self.temperature, "pick": self.pick,
                "pick_predicted": self.pick_predicted, "pick_measured": self.pick_measured, "best": self.best,
                "best_measured": self.best_measured, "regret": self.regret, "within_goal": self.regret <= REGRET_GOAL}


def _label(row: ValidationRow) -> str:
    return f"{row.drafter}/gamma={row.gamma}"


def decide(category: str, temperature: float, rows: list[ValidationRow]) -> Decision:
    """The plan's pick and the measured best among one temperature's rows (see `Decision`)."""
    rows = [r for r in rows if r.temperature == temperature]
    pick = max(rows, key=lambda r: r.extended_estimated, default=None)
    best = max(rows, key=lambda r: r.measured, default=None)
    if pick is None or pick.extended_estimated <= 1.0:
        pick_values = (None, 1.0, 1.0)
    else:
        pick_values = (_label(pick), pick.extended_estimated, pick.measured)
    best_values = (None, 1.0) if best is None or best.measured <= 1.0 else (_label(best), best.measured)
    return Decision(category, temperature, *pick_values, *best_values)


@dataclass
class ValidationSuite:
    """results: category -> its validation (in the prompts' order); prompts: what the prompt set
    recorded (`PromptSet.describe`: chat template, truncations, lengths per category)."""

    results: dict[str, ValidationResult]
    prompts: dict[str, Any]

    @property
    def single(self) -> ValidationResult | None:
        """The one result when there is one category (reported as a plain validation)."""
        return next(iter(self.results.values())) if len(self.results) == 1 else None

    def decisions(self) -> list[Decision]:
        return [decide(category, t, result.rows) for category, result in self.results.items()
                for t in result.config.temperatures]

    def rows(self) -> list[tuple[str, ValidationRow]]:
        return [(category, row) for category, result in self.results.items() for row in result.rows]

    def to_dict(self) -> dict[str, Any]:
        if self.single is not None:
            return {**self.single.to_dict(), "prompt_set": self.prompts,
                    "decisions": [d.to_dict() for d in self.decisions()]}
        rows = self.rows()
        return {"prompt_set": self.prompts, "categories": {c: r.to_dict() for c, r in self.results.items()},
                "decisions": [d.to_dict() for d in self.decisions()],
                "configurations": len(rows), "tolerance": TOLERANCE, "cost_tolerance": COST_TOLERANCE,
                "regret_goal": REGRET_GOAL,
                "extended_within_tolerance": sum(r.extended_within_tolerance for _, r in rows),
                "measured_range": [min((r.measured for _, r in rows), default=None),
                                   max((r.measured for _, r in rows), default=None)]}
