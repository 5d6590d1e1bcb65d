"""Markdown of a validation over several categories (`ValidationSuite`): the Spec-Bench layout
(methods as rows, categories as columns, an overall column), alpha and the step time per
category, the plan's decisions and their regret, then each category's full report
(`report.full_report`). A single category renders as a plain validation."""
from __future__ import annotations

import statistics

from specdec.reference.validation.config import TOLERANCE
from specdec.reference.validation.report import _num, _pct, _t, full_report
from specdec.reference.validation.suite import REGRET_GOAL, ValidationSuite


def prompts_line(suite: ValidationSuite) -> str:
    p = suite.prompts
    parts = [f"{c} {v['prompts']} prompts, median {v['median_tokens']} tokens (max {v['max_tokens']})"
             for c, v in p["categories"].items()]
    return (f"prompts: {'; '.join(parts)}; chat template {'applied to user turns' if p['chat_template'] else 'not applied'}"
            f"; {p['truncated']} prompt(s) truncated from the start")


def category_table(suite: ValidationSuite) -> str:
    """Measured speedup (extended prediction) per method and category; overall = the mean over
    the categories where the method ran."""
    cats = list(suite.results)
    methods = list(dict.fromkeys((r.drafter, r.temperature, r.gamma) for _, r in suite.rows()))
    cell = {(c, r.drafter, r.temperature, r.gamma): r for c, r in suite.rows()}
    lines = ["| method | T | gamma | " + " | ".join(cats) + " | overall (mean) |", "|---|---|---|" + "---|" * (len(cats) + 1)]
    for drafter, t, g in methods:
        rows = [cell.get((c, drafter, t, g)) for c in cats]
        cells = ["-" if r is None else f"{r.measured:.2f}x ({r.extended:.2f}x)" for r in rows]
        present = [r for r in rows if r is not None]
        overall = (f"{statistics.fmean(r.measured for r in present):.2f}x "
                   f"({statistics.fmean(r.extended for r in present):.2f}x)")
        lines.append(f"| {drafter} | {t:g} | {g} | " + " | ".join(cells) + f" | {overall} |")
    return "\n".join(lines)


def alpha_by_category(suite: ValidationSuite) -> str:
    cats = list(suite.results)
    keys = list(dict.fromkeys(k for r in suite.results.values() for k in r.alphas))
    lines = ["| drafter | T | " + " | ".join(cats) + " |", "|---|---|" + "---|" * len(cats)]
    for drafter, t in keys:
        cells = [_num(suite.results[c].alphas[(drafter, t)].alpha, ".3f") if (drafter, t) in suite.results[c].alphas
                 else "-" for c in cats]
        lines.append(f"| {drafter} | {t:g} | " + " | ".join(cells) + " |")
    steps = [f"{c}: t(1) {1000 * r.timing.step_seconds:.1f} ms at {r.timing.context_tokens} tokens, v(2) "
             f"{r.timing.verify_cost[1]:.2f}, v(9) {_num(r.timing.verify_cost[8] if len(r.timing.verify_cost) > 8 else None, '.2f')}"
             for c, r in suite.results.items()]
    return "\n".join(lines) + "\n\ncosts per category: " + "; ".join(steps)


def decision_table(suite: ValidationSuite) -> str:
    lines = ["| category | T | plan's pick (estimator alone) | predicted | measured | measured best | measured | regret |",
             "|---|---|---|---|---|---|---|---|"]
    for d in suite.decisions():
        flag = "" if d.regret <= REGRET_GOAL else " (over the goal)"
        lines.append(f"| {d.category} | {d.temperature:g} | {d.pick or 'do not speculate'} | {d.pick_predicted:.2f}x | "
                     f"{d.pick_measured:.2f}x | {d.best or 'plain decoding'} | {d.best_measured:.2f}x | "
                     f"{_pct(d.regret)}{flag} |")
    return "\n".join(lines)


def suite_summary(suite: ValidationSuite) -> str:
    rows = [r for _, r in suite.rows()]
    worst_c, worst = max(suite.rows(), key=lambda cr: abs(cr[1].error_extended))
    decisions = suite.decisions()
    return (f"extended model (ii) within {100 * TOLERANCE:.0f}% of the measured speedup: "
            f"{sum(r.extended_within_tolerance for r in rows)}/{len(rows)} configurations (largest error "
            f"{_pct(worst.error_extended)}: {worst_c} {worst.drafter} {_t(worst.temperature)} gamma {worst.gamma}); "
            f"measured speedups {min(r.measured for r in rows):.2f}x .. {max(r.measured for r in rows):.2f}x; "
            f"plan's pick within {100 * REGRET_GOAL:.0f}% of the measured best: "
            f"{sum(d.regret <= REGRET_GOAL for d in decisions)}/{len(decisions)}")


def suite_report(suite: ValidationSuite) -> str:
    if suite.single is not None:
        return prompts_line(suite) + "\n\n" + full_report(suite.single) + "\n\n## The plan's decision\n\n" \
            + decision_table(suite)
    parts = [prompts_line(suite),
             "## Speedup by category: measured (extended prediction)\n\n" + category_table(suite),
             "## alpha and costs by category\n\n" + alpha_by_category(suite),
             "## The plan's decisions (from the estimator alone) and their regret\n\n" + decision_table(suite),
             suite_summary(suite)]
    if any(r.policy_rows for r in suite.results.values()):
        parts.append("## Dynamic draft length by category: measured vs predicted\n\n" + policy_by_category(suite))
    parts += [f"# Category {c}\n\n" + full_report(r) for c, r in suite.results.items()]
    return "\n\n".join(parts)


def policy_by_category(suite: ValidationSuite) -> str:
    """Every draft-length rule's row (`specdec.reference.validation.dynamic`) with its category,
    then the threshold decisions per category."""
    from specdec.reference.validation.dynamic import decision_table, policy_table, threshold_decisions

    tables, decisions, held, total = [], [], 0, 0
    for c, r in suite.results.items():
        if not r.policy_rows:
            continue
        table = policy_table(r.policy_rows).splitlines()
        tables += ([("| category " + table[0]), "|---" + table[1]] if not tables else []) + \
            [f"| {c} " + line for line in table[2:]]
        held += sum(p.within_tolerance for p in r.policy_rows)
        total += len(r.policy_rows)
        dt = decision_table(threshold_decisions(r.policy_rows, r.rows)).splitlines()
        decisions += ([("| category " + dt[0]), "|---" + dt[1]] if not decisions else []) + \
            [f"| {c} " + line for line in dt[2:]]
    return ("\n".join(tables) + f"\n\nwithin {100 * TOLERANCE:.0f}%: {held}/{total}\n\n"
            "The threshold the prediction ranks first (regret against the measured best threshold; goal 3 %) "
            "and the best threshold's gain over the best fixed gamma:\n\n" + "\n".join(decisions))
