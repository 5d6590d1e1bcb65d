"""A saved B-client check (`specdec llamacpp validate --batch-sizes ... --out`) predicted again from a
cost file: its points recomputed (`engines/llamacpp/batches.points`) from the check's own records,
with the file's accepted-token cost or a given one, with the file's mixed steps or without them.

    .venv/bin/python benchmarks/check_llamacpp_batches.py CHECK.json COSTS.json [--accept-ms X] [--no-mixed]

What it is for: a cost file timed apart from the check it prices (another moment, another estimator)
and what the mixed steps change (benchmarks/RESULTS.md, "The EPYC rows").
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from specdec.engines.llamacpp import batches


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
    for at in check["temperatures"]:
        records = [batches.BatchRecord(**r) for r in at["records"]]
        for c in batches.points(records, costs, accept, check.get("seed", 0)):
            print(f"{c['config']} T={at['temperature']:g}: crossover measured {c['crossover']}, predicted "
                  f"{c['predicted_crossover']}; " + "  ".join(
                      f"B={p['batch']} {p['measured']:.3f}x/{p['predicted']:.3f}x ({100 * p['error']:+.1f}%, "
                      f"{p['priced_by']})" for p in c["points"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
