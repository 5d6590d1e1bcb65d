"""A saved B-client check (`specdec llamacpp validate --batch-sizes ... --out`) predicted again from a
cost file: its points recomputed (`engines/llamacpp/batches.points`) from the check's own records,
with the file's accepted-token cost or a given one, with the file's mixed steps or without them; and
what `specdec plan --from` would have promised at each B, from the B = 1 counts alone (the /metrics
page of the check's B = 1 requests, the cost file at the check's context; gamma = the table's last
column: the longest draft position observed, or the file's largest k - 1 if smaller).

    .venv/bin/python benchmarks/check_llamacpp_batches.py CHECK.json COSTS.json [--accept-ms X] [--no-mixed]

What it is for: a cost file timed apart from the check it prices (another moment, another estimator),
what the mixed steps change (benchmarks/RESULTS.md, "The EPYC rows"), and the plan's batch table
(each slot drafting gamma tokens on the share s of steps: coarser than the check's joint pi(k, n))
against the same measurements.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from specdec.costfiles import batch_times_of
from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.llamacpp import batches
from specdec.engines.llamacpp.validation import metrics_page
from specdec.engines.metrics import read_counts
from specdec.simulator.batch import BatchTimes, batch_times_within
from specdec.simulator.engine_plan import engine_plan


def plan_speedups(records: list, config: str, tables: list[BatchTimes], context: float
                  ) -> tuple[int, dict[int, float]]:
    """(gamma, {B: speedup}) of `plan --from` the smallest B's requests' page with the cost file: the
    batch table's last column, priced as llama.cpp splits its batches."""
    smallest = min(x.batch for x in records)
    first = [r for r in records if r.config == config and r.batch == smallest]
    counts = read_counts(metrics_page(batches.heads(first)))
    times = batch_times_within(tables, context)
    plan = engine_plan(acceptance_from_counts(counts), 0.0, counts.source, batch_times=times,
                       draft_share=counts.draft_share, equal_split=True)
    gamma = plan.batch.speedup.shape[1] - 1
    return gamma, {int(B): float(row[gamma]) for B, row in zip(times.batch_sizes, plan.batch.speedup)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("check", type=Path)
    ap.add_argument("costs", type=Path)
    ap.add_argument("--accept-ms", type=float, default=None, help="the accepted-token cost [default: the file's]")
    ap.add_argument("--no-mixed", action="store_true", help="price from t(B, k) alone")
    a = ap.parse_args(argv)
    check, costs = json.loads(a.check.read_text()), json.loads(a.costs.read_text())
    if a.no_mixed:
        for table in costs["batch_timing"] if isinstance(costs["batch_timing"], list) else [costs["batch_timing"]]:
            table.pop("mixed", None)
    accept = max(0.0, costs.get("accept_seconds") or 0.0) if a.accept_ms is None else a.accept_ms / 1000
    print(f"{a.costs.name}: accepted token {1000 * accept:.3f} ms, {'t(B, k) alone' if a.no_mixed else 'mixed steps'}")
    tables = batch_times_of(costs, a.costs)
    for at in check["temperatures"]:
        records = [batches.BatchRecord(**r) for r in at["records"]]
        for c in batches.points(records, costs, accept, check.get("seed", 0)):
            print(f"{c['config']} T={at['temperature']:g}: crossover measured {c['crossover']}, predicted "
                  f"{c['predicted_crossover']}; " + "  ".join(
                      f"B={p['batch']} {p['measured']:.3f}x/{p['predicted']:.3f}x ({100 * p['error']:+.1f}%, "
                      f"{p['priced_by']})" for p in c["points"]))
            gamma, planned = plan_speedups(records, c["config"], tables, c["context"])
            print(f"  plan --from the B = 1 counts, gamma {gamma}: " + "  ".join(
                f"B={b} {planned[b]:.3f}x ({100 * (planned[b] / p['measured'] - 1):+.1f}%)"
                for p in c["points"] if (b := p["batch"]) in planned))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
