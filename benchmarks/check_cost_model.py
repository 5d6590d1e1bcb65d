"""The cost-model check of saved validations, pooled over their categories and files: iterations
within 5 % of the cost model (measured / predicted iteration time) in target steps of each run's
moment and in seconds, over every configuration and over those that ran on one machine (their
runs' probed step and the t(1) they are priced at within 10 % of each other:
`specdec.reference.validation.report.one_machine`; docs/validation.md, "When the host moves the
machine's speed"), the mean and spread of the errors, and each miss with its probes. Usage:
    .venv/bin/python benchmarks/check_cost_model.py DIR/validation.json [MORE.json ...]
"""
from __future__ import annotations

import json
import sys

import numpy as np

from specdec.reference.validation.config import COST_TOLERANCE
from specdec.reference.validation.report import one_machine


def configurations(paths: list[str]) -> list[tuple[str, dict, list[float] | None, bool]]:
    """(category, row, probe range, one machine) for every configuration of the files."""
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        for category, result in (saved.get("categories") or {saved.get("category") or path: saved}).items():
            probes = result["interference"]["by_configuration"]
            for row in result["rows"]:
                probe = probes.get(f"t={row['temperature']:g} {row['drafter']}/gamma={row['gamma']}", {}).get(
                    "probe_seconds")
                steps = row.get("iteration_steps_predicted")
                priced = row["iteration_seconds_predicted"] / steps if steps else None
                out.append((category, row, probe, one_machine(probe, priced)))
    return out


def summary(label: str, rows: list[tuple[str, dict, list[float] | None, bool]]) -> str:
    steps = [r["cost_error_steps"] for _, r, _, _ in rows if r.get("cost_error_steps") is not None]
    seconds = [r["cost_error"] for _, r, _, _ in rows]
    if not rows:
        return f"{label}: none"
    if not steps:
        return f"{label}: no probed configuration"
    within = lambda errors: sum(abs(e) <= COST_TOLERANCE for e in errors)  # noqa: E731
    return (f"{label}: in steps {within(steps)}/{len(steps)} (mean {100 * np.mean(steps):+.1f} %, sd "
            f"{100 * np.std(steps):.1f} %); in seconds {within(seconds)}/{len(seconds)}")


def main(paths: list[str]) -> None:
    rows = configurations(paths)
    steady = [x for x in rows if x[3]]
    print(summary("every configuration", rows))
    print(summary("on one machine", steady))
    for category in dict.fromkeys(c for c, _, _, _ in rows):
        print(summary(f"  {category}", [x for x in rows if x[0] == category]) + "; "
              + summary("on one machine", [x for x in steady if x[0] == category]))
    for category, r, probe, one in rows:
        if r.get("cost_error_steps") is not None and abs(r["cost_error_steps"]) > COST_TOLERANCE:
            probed = "-" if probe is None else "-".join(f"{1e3 * p:.1f}" for p in (probe[0], probe[2]))
            print(f"miss: {category} {r['drafter']} t={r['temperature']:g} gamma {r['gamma']}: "
                  f"{100 * r['cost_error_steps']:+.1f} % in steps, probed {probed} ms, "
                  f"{'one machine' if one else 'two machines'}")


if __name__ == "__main__":
    main(sys.argv[1:])
