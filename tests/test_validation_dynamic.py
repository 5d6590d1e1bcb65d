"""The validation's draft-length rows (issue 52): the prediction each rule gets, the threshold
decision (the prediction's pick among the decoded thresholds, its regret, the gain over fixed gamma)
and the by-category table."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pytest

from specdec.reference.core.policy import ConfidenceThreshold, HeuristicSchedule
from specdec.reference.validation.dynamic import PolicyRow, predict_policy, threshold_decisions
from specdec.reference.validation.suite_report import policy_by_category
from specdec.simulator.dynamic import ConfidenceLaw, heuristic_schedule
from specdec.simulator.prediction import budgeted_speedup

LAW = ConfidenceLaw(np.array([0.0, 0.5, 0.9, 1.0]), np.array([[0.5, 0.3, 0.2]]), np.array([[0.1, 0.5, 0.9]]))
V = np.array([1.0, 1.05, 1.1, 1.15, 1.2])


def test_predictions() -> None:
    # tau 0 with n_min = n_max = gamma is fixed gamma at i.i.d. alpha (long runs)
    speed, tokens, drafts = predict_policy(ConfidenceThreshold(0.0, 3, 3), LAW, 0.1, V)
    alpha = 0.5 * 0.1 + 0.3 * 0.5 + 0.2 * 0.9
    assert tokens == pytest.approx(1 + alpha + alpha ** 2 + alpha ** 3) and drafts == pytest.approx(3)
    assert speed == pytest.approx(budgeted_speedup(alpha, 3, 4000, 0.1, V), rel=2e-3)
    speed, tokens, drafts = predict_policy(HeuristicSchedule(2, 4, True), LAW, 0.1, V)
    assert speed == pytest.approx(heuristic_schedule(LAW, 0.1, V, cap=4).speedup) and 1 <= drafts <= 4
    assert predict_policy(ConfidenceThreshold(0.9, 0, 4), LAW, 0.1, V)[2] < 1  # P(conf >= 0.9) = 0.2 per position
    # c per forward count: a flat curve is the number; dearer short iterations (the first step's fixed
    # cost spread over fewer forwards) price a rule whose drafts are short slower, its counts unchanged
    rule = ConfidenceThreshold(0.5, 0, 4)
    assert predict_policy(rule, LAW, [0.1] * 4, V) == pytest.approx(predict_policy(rule, LAW, 0.1, V))
    dear = predict_policy(rule, LAW, [0.16, 0.13, 0.11, 0.1], V)
    assert dear[0] < predict_policy(rule, LAW, 0.1, V)[0] and dear[1:] == pytest.approx(predict_policy(rule, LAW, 0.1,
                                                                                                          V)[1:])


def _row(drafter, tau, measured, predicted, policy=None):
    return PolicyRow(drafter, 0.0, policy or f"confidence:tau={tau}", tau, 6, 0.2, (0.2,) * 6, measured,
                     (measured - 0.1, measured + 0.1),
                     None, predicted, 2.0, 2.0, 1.0, 1.0)


def test_threshold_decisions_and_table() -> None:
    rows = [_row("d", 0.3, 1.0, 1.3), _row("d", 0.9, 1.2, 1.1), _row("d", None, 2.0, 2.0, "heuristic:initial=2")]
    fixed = [NS(drafter="d", temperature=0.0, gamma=1, measured=1.1), NS(drafter="d", temperature=0.0, gamma=2,
                                                                         measured=0.9)]
    (decision,) = threshold_decisions(rows, fixed)
    assert decision.pick == "confidence:tau=0.3" and decision.best == "confidence:tau=0.9"  # the heuristic is no threshold
    assert decision.regret == pytest.approx(1 - 1.0 / 1.2) and decision.gain == pytest.approx(1.2 / 1.1 - 1)
    assert decision.fixed_best == "gamma=1" and not decision.to_dict()["within_goal"]
    text = policy_by_category(NS(results={"code": NS(policy_rows=rows, rows=fixed), "edit": NS(policy_rows=[], rows=[])}))
    assert text.count("| code | d | 0 |") == 4 and "within 10%: 2/3" in text and "edit" not in text


DYNAMIC = Path(__file__).parent.parent / "benchmarks" / "data" / "dynamic"


@pytest.mark.parametrize("name", ["validation-window24-prompts10.json", "validation-window24-prompts10-b.json"])
def test_a_committed_tau_grid_meets_the_criteria_as_reported(name) -> None:
    """RESULTS' τ grid (run-window.sh, the decodes on the estimator's 10 prompts): every rule within 10 % and
    the prediction's threshold within 3 % of the measured best, derived again from the stored rows."""
    fields = {f.name for f in dataclasses.fields(PolicyRow)}
    for category in json.loads((DYNAMIC / name).read_text())["categories"].values():
        rows = [PolicyRow(**{k: tuple(v) if isinstance(v, list) else v for k, v in r.items() if k in fields})
                for r in category["policy_rows"]]
        assert len(rows) == 20 and all(r.within_tolerance for r in rows)
        fixed = [NS(drafter=r["drafter"], temperature=r["temperature"], gamma=r["gamma"], measured=r["measured"])
                 for r in category["rows"]]
        decisions = threshold_decisions(rows, fixed)
        assert len(decisions) == len(category["policy_decisions"])
        for decision, stored in zip(decisions, category["policy_decisions"]):
            assert decision.to_dict() == pytest.approx(stored)
        assert len(decisions) == 4 and max(d.regret for d in decisions) <= 0.03
