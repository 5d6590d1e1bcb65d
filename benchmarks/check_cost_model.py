"""The cost-model check of saved validations, pooled over their categories and files: iterations
within 5 % of the cost model (measured / predicted iteration time) in target steps of each run's
moment and in seconds, over every configuration and over those that ran on one machine (their
runs' probed step and the t(1) they are priced at within 10 % of each other:
`specdec.reference.validation.report.one_machine`; docs/validation.md, "When the host moves the
machine's speed"; unknown for runs saved before ca23945, which kept no probe range), the mean and
spread of the errors, and each miss with its probes. Usage:
    .venv/bin/python benchmarks/check_cost_model.py DIR/validation.json [MORE.json ...]
"""
from __future__ import annotations

import json
import sys

import numpy as np

from specdec.reference.validation.config import COST_TOLERANCE
from specdec.reference.validation.report import one_machine, part_errors
from specdec.reference.validation.rows import configuration_key, priced_step

Configuration = tuple[str, dict, "list[float] | None", "bool | None"]


def configurations(paths: list[str]) -> list[Configuration]:
    """(category, row, probe range, one machine: None when unknown) for every configuration of the files."""
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        for category, result in (saved.get("categories") or {saved.get("category") or path: saved}).items():
            probes = result["interference"]["by_configuration"]
            for row in result["rows"]:
                probe = probes.get(configuration_key(row["temperature"], row["drafter"], row["gamma"]), {}).get(
                    "probe_seconds")
                priced = priced_step(row["iteration_seconds_predicted"], row.get("iteration_steps_predicted"))
                out.append((category, row, probe, one_machine(probe, priced)))
    return out


def within(errors: list[float]) -> int:
    return sum(abs(e) <= COST_TOLERANCE for e in errors)


def summary(label: str, rows: list[Configuration]) -> str:
    """How many of rows the cost model prices within COST_TOLERANCE, in steps (mean, sd) and in seconds."""
    if not rows:
        return f"{label}: none"
    seconds = [r["cost_error"] for _, r, _, _ in rows if r.get("cost_error") is not None]
    text = f"in seconds {within(seconds)}/{len(seconds)}"
    steps = [r["cost_error_steps"] for _, r, _, _ in rows if r.get("cost_error_steps") is not None]
    if steps:
        text = (f"in steps {within(steps)}/{len(steps)} (mean {100 * np.mean(steps):+.1f} %, sd "
                f"{100 * np.std(steps):.1f} %); " + text)
    return f"{label}: {text}"


def split(label: str, rows: list[Configuration]) -> str:
    """The summary of rows that ran on one machine, or that it is unknown (no probe range saved)."""
    if all(one is None for _, _, _, one in rows):
        return f"{label}: unknown (no probe range saved: runs before ca23945)"
    return summary(label, [x for x in rows if x[3]])


def by_part(label: str, rows: list[Configuration]) -> str:
    """The mean of what each part of the iteration adds to the error in steps (`report.part_errors`):
    where a shared excess sits; nothing for runs saved before the parts were measured."""
    shares = [part_errors(r.get("cost_parts_steps"), r.get("iteration_steps_predicted")) for _, r, _, _ in rows]
    shares = [s for s in shares if s]
    if not shares:
        return f"{label}: not measured (runs saved before the parts were)"
    means = np.mean(shares, axis=0)
    return f"{label} ({len(shares)} configurations): " + ", ".join(
        f"{name} {100 * m:+.1f} %" for name, m in zip(("pass", "after the pass", "draft"), means))


def against_speed(label: str, error, rows: list[Configuration]) -> str:
    """An error (`error(row)`: a share of the predicted iteration, None where not measured) against
    how fast the machine ran the decodes: each configuration's median probed step over the t(1) it
    is priced at, - 1. v(k)'s shape moves with the machine's speed (flatter when slower:
    docs/validation.md, "When the host moves the machine's speed"), so a negative slope is decodes
    run slower than the costs were timed; the intercept is what is left at the priced speed."""
    points = [(probe[1] / priced_step(r["iteration_seconds_predicted"], r["iteration_steps_predicted"]) - 1, error(r))
              for _, r, probe, _ in rows if probe and r.get("iteration_steps_predicted")]
    points = [p for p in points if p[1] is not None]
    if len(points) < 3:
        return f"{label} against the probed speed: too few configurations"
    x, y = np.array(points).T
    slope, intercept = np.polyfit(x, y, 1)
    return (f"{label} against the probed step / priced t(1) - 1 ({len(points)} configurations, "
            f"{100 * x.min():+.1f} to {100 * x.max():+.1f} %): slope {slope:+.2f}, at the priced speed "
            f"{100 * intercept:+.1f} %, r {np.corrcoef(x, y)[0, 1]:+.2f}")


def per_iteration(rows: list[Configuration]) -> list[str]:
    """Per drafter and gamma, pooled over categories, temperatures and files: what the iterations ran
    over the cost model in target steps per iteration (measured - predicted), beside the predicted
    iteration (an excess that stays while the iteration grows is a fixed cost per iteration, not a
    share of it), and its part in seconds over the priced t(1); the rest is the unit, each run's
    probes against that t(1)."""
    groups: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    for _, r, _, _ in rows:
        if r.get("iteration_steps_predicted"):
            priced = priced_step(r["iteration_seconds_predicted"], r["iteration_steps_predicted"])
            groups.setdefault((r["drafter"], r["gamma"]), []).append((
                r["iteration_steps_measured"] - r["iteration_steps_predicted"], r["iteration_steps_predicted"],
                (r["iteration_seconds_measured"] - r["iteration_seconds_predicted"]) / priced))
    means = {key: np.mean(got, axis=0) for key, got in sorted(groups.items())}
    return [f"  {name} gamma {gamma}: {excess:+.3f} steps per iteration of {predicted:.2f} predicted, "
            f"{seconds:+.3f} of it in seconds ({len(groups[name, gamma])} configurations)"
            for (name, gamma), (excess, predicted, seconds) in means.items()]


def pass_part(row: dict) -> float | None:
    shares = part_errors(row.get("cost_parts_steps"), row.get("iteration_steps_predicted"))
    return shares[0] if shares else None


def main(paths: list[str]) -> None:
    rows = configurations(paths)
    print(summary("every configuration", rows))
    print(split("on one machine", rows))
    print(by_part("the error in steps by part, mean share of the predicted iteration", rows))
    print(against_speed("the error in steps", lambda r: r.get("cost_error_steps"), rows))
    print(against_speed("its pass part", pass_part, rows))
    print("the excess in target steps per iteration, by drafter and gamma:")
    print("\n".join(per_iteration(rows)))
    for category in dict.fromkeys(c for c, _, _, _ in rows):
        mine = [x for x in rows if x[0] == category]
        print(summary(f"  {category}", mine) + "; " + split("on one machine", mine))
    names = {True: "one machine", False: "two machines", None: "machine unknown"}
    for category, r, probe, one in rows:
        if r.get("cost_error_steps") is not None and abs(r["cost_error_steps"]) > COST_TOLERANCE:
            probed = "-" if probe is None else f"{1e3 * probe[0]:.1f}-{1e3 * probe[2]:.1f} ms"
            print(f"miss: {category} {r['drafter']} t={r['temperature']:g} gamma {r['gamma']}: "
                  f"{100 * r['cost_error_steps']:+.1f} % in steps, probed {probed}, {names[one]}")


if __name__ == "__main__":
    main(sys.argv[1:])
