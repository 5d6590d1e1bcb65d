"""A saved B-client check (`specdec llamacpp validate --batch-sizes ... --out`) predicted again from a
cost file: its points recomputed (`engines/llamacpp/batches.points`) from the check's own records,
with the file's accepted-token cost or a given one, with the file's mixed steps or without them; and
what `specdec plan --from` would have promised at each B, from the B = 1 counts alone (the /metrics
page of the check's B = 1 requests, the cost file at the check's context; gamma = the table's last
column: the longest draft position observed, or the file's largest k - 1 if smaller).

    .venv/bin/python benchmarks/check_llamacpp_batches.py CHECK.json COSTS.json [--accept-ms X] [--no-mixed] \
        [--per-prompt-neighbours]

`--per-prompt-neighbours`: a streams check's rows with a traced B = 1 law, predicted again with the
timed slot drawn from that law (its steps pooled over the requests) and its B - 1 neighbours from the
prompts weighted equally (each request's own law, averaged), as a check whose streams cycle their own
prompts gives every prompt the same slot time (engines/llamacpp/streams.py, `UNTIMED`).

What it is for: a cost file timed apart from the check it prices (another moment, another estimator),
what the mixed steps change (benchmarks/RESULTS.md, "The EPYC rows"), and the plan's batch table
(each slot drafting gamma tokens on the share s of steps: coarser than the check's joint pi(k, n))
against the same measurements.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from specdec.costfiles import batch_times_of
from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.llamacpp import batches
from specdec.engines.llamacpp.validation import metrics_page
from specdec.engines.metrics import read_counts
from specdec.simulator.batch import BatchTimes, batch_times_within
from specdec.simulator.engine_plan import engine_plan
from specdec.simulator.equal_split import split_seconds, ubatch_seconds

SAMPLES = 40_000


def request_law(record: batches.BatchRecord, width: int) -> np.ndarray:
    """pi(k, n) [width, width] (probabilities) of one traced B = 1 request's steps."""
    law = np.zeros((width, width))
    np.add.at(law, tuple(np.asarray(record.steps, dtype=int).reshape(-1, 2).T), 1.0)
    law[0, 0] += max(record.tokens - 1, 1) - len(record.steps) - sum(n for _, n in record.steps)
    return law / law.sum()


def slot_speedup(own: np.ndarray, neighbours: np.ndarray, B: int, u_spec: np.ndarray, u_plain: float,
                 accept_s: float, rng: np.random.Generator) -> float:
    """One slot's speedup at B (its throughput against the plain step's) when it draws its steps from
    `own` and the other B - 1 slots from `neighbours`, the slot at a uniform position."""
    def draw(law, size):
        return np.divmod(rng.choice(law.size, size=size, p=law.reshape(-1)), law.shape[1])

    (k0, n0), (k, n) = draw(own, SAMPLES), draw(neighbours, (SAMPLES, B - 1))
    mine = np.arange(B)[None, :] == rng.integers(0, B, SAMPLES)[:, None]
    K, N = np.empty((SAMPLES, B), dtype=int), np.empty((SAMPLES, B), dtype=int)
    K[mine], K[~mine], N[mine], N[~mine] = k0, k.reshape(-1), n0, n.reshape(-1)
    seconds, _ = split_seconds(K + 1, u_spec)
    return float((n0 + 1).mean() / (seconds + accept_s * N.sum(axis=1)).mean() * u_plain)


def per_prompt_neighbours(records: list, config: str, costs: dict, accept_s: float, points: list[dict]) -> str:
    """The `--per-prompt-neighbours` line of one row (module doc), or "" without a traced B = 1 law."""
    first = [r for r in records if r.config == config and r.batch == 1]
    joint = batches.joint_from_steps(first) if first else None
    if joint is None:  # untraced, or the trace misses drafts
        return ""
    pooled, width = joint / joint.sum(), joint.shape[0]  # every step of every request: the check's law
    equal = sum(request_law(r, width) for r in first) / len(first)
    context = float(np.mean([r.prompt_tokens + r.tokens / 2 for r in records]))
    seconds, mixed = batches.batch_seconds(costs, context), batches.mixed_seconds(costs, context)
    rng, out = np.random.default_rng(0), []
    for p in points:
        if (B := p["batch"]) == 1:
            continue
        u = ubatch_seconds(seconds, B, width)
        u_spec, _ = batches.speculating_ubatches(u, B, width - 1, mixed)
        by = [slot_speedup(pooled, neighbours, B, u_spec, float(u[B - 1, 0]), accept_s, rng)
              for neighbours in (pooled, equal)]
        out.append(f"B={B} {by[0]:.3f}x ({100 * (by[0] / p['measured'] - 1):+.1f}%) / "
                   f"{by[1]:.3f}x ({100 * (by[1] / p['measured'] - 1):+.1f}%)")
    return "  neighbours from the pooled law / per prompt equally: " + "  ".join(out)


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
    ap.add_argument("--per-prompt-neighbours", action="store_true",
                    help="also predict each row with the neighbours' prompts weighted equally (module doc)")
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
            if a.per_prompt_neighbours and (line := per_prompt_neighbours(records, c["config"], costs, accept,
                                                                           c["points"])):
                print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
