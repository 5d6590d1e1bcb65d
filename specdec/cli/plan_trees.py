"""`specdec plan-trees`: the best parallel-drafts configuration (method, k, p, depth h) from a
saved lattice study (`specdec heads lattice --save`), with the study's own verify-step timings
or another machine's verify-cost curve (`specdec estimate --json`). torch-free.

    specdec plan-trees study.json
    specdec plan-trees study.json --verify-cost-file gpu-estimate.json --draft-ms 0.3
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from specdec.cli.common import to_json
from specdec.simulator.trees import PLAN_ROWS, format_tree_plan

def drafter_spec(study: dict[str, Any], options: dict[str, Any]) -> str:
    """The `--drafter` spec that decodes with a study method's options."""
    spec = f"heads:{study.get('heads_path', '<heads folder>')}"
    rescorer = options.get("rescorer")
    if options.get("p", 1) > 1 or rescorer is not None:
        spec += f",k={study['k']}" + (f",p={options['p']}" if options.get("p", 1) > 1 else "")
    if rescorer is not None:
        kind, path = study.get("rescorers", {}).get(rescorer, ("ngram", f"<{rescorer}>"))
        spec += f",{kind}={path},w={options['w']:g}" + (",rescore=local" if options.get("rescore") == "local" else "")
    return spec


def _read_json(path: Path, option: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path} as JSON: {exc}", param_hint=option) from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path} must hold a JSON object", param_hint=option)
    return data


@click.command("plan-trees")
@click.argument("study_path", metavar="STUDY", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--verify-cost-file", "cost_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plan with another machine's costs instead of the study's own verify-step timings: "
                   "benchmarks/bench_costs.py output (tree verify steps) or `specdec estimate --json` (verify_cost "
                   "and cost.target_step_seconds).")
@click.option("--draft-ms", type=float, default=None,
              help="Milliseconds of the heads' pass per iteration. Default: the study's measured heads pass.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def plan_trees_command(study_path: Path, cost_path: Path | None, draft_ms: float | None, as_json: bool) -> None:
    """Predicted speedup of every (method, depth) of a lattice study, best first, and the drafter
    spec and --gamma of the best. Model and assumptions: `specdec.simulator.trees`."""
    from specdec.simulator.trees import plan_trees, steps_from_curve

    study = _read_json(study_path, "STUDY")
    if not isinstance(study.get("by_depth"), list) or "k" not in study:
        raise click.BadParameter(f"{study_path} is not a lattice study (`specdec heads lattice --save`) of this "
                                 "version: no by_depth rows", param_hint="STUDY")
    if draft_ms is not None and not 0 <= draft_ms < 1e6:
        raise click.BadParameter(f"must be in [0, 1e6) ms, got {draft_ms}", param_hint="--draft-ms")
    heads_ms = draft_ms if draft_ms is not None else study.get("heads_pass_ms")
    if heads_ms is None:
        raise click.BadParameter("the study was run with --no-timing: give --draft-ms", param_hint="--draft-ms")
    if cost_path is not None:
        cost = _read_json(cost_path, "--verify-cost-file")
        curve = cost.get("verify_cost")
        step = (cost.get("cost") or {}).get("target_step_seconds", cost.get("target_step_seconds"))
        if isinstance(cost.get("verify_step_ms"), dict) and cost["verify_step_ms"].get("0"):
            steps = {int(n): ms / 1000 for n, ms in cost["verify_step_ms"].items()}
            source = f"{cost_path} (verify steps timed on trees, {cost.get('device_name') or cost.get('device', '?')})"
        elif isinstance(curve, list) and curve and isinstance(step, (int, float)) and step > 0:
            steps = steps_from_curve(float(step), curve)
            source = f"{cost_path} (v(1..{len(curve)}), t(1) {1000 * step:.2f} ms)"
        else:
            raise click.BadParameter(f"{cost_path} needs verify_cost [v(1), ...] and cost.target_step_seconds "
                                     "(`specdec estimate --json` without --no-timing) or verify_step_ms "
                                     "(benchmarks/bench_costs.py)", param_hint="--verify-cost-file")
    elif study.get("verify_step_ms"):
        steps = {int(n): ms / 1000 for n, ms in study["verify_step_ms"].items()}
        source = "the study's verify steps timed on trees"
    else:
        raise click.BadParameter("the study was run with --no-timing: give a verify-cost file",
                                 param_hint="--verify-cost-file")
    largest = max(steps)
    rows = [r for r in study["by_depth"] if r.get("tree_tokens") is not None and r["tree_tokens"] <= largest]
    skipped = sum(1 for r in study["by_depth"] if r.get("tree_tokens") is not None and r["tree_tokens"] > largest)
    plan = plan_trees(rows, steps, heads_ms / 1000)
    options = {row["method"]: row.get("options") or {} for row in study["by_depth"]}
    for r in plan:
        r["drafter"], r["gamma"] = drafter_spec(study, options[r["method"]]), r["depth"]
    best = plan[0] if plan else None
    if as_json:
        click.echo(to_json({"study": str(study_path), "verify_steps": source, "draft_ms": heads_ms,
                            "skipped_larger_trees": skipped, "best": best, "plan": plan}))
        return
    click.echo(f"tree plan from {study_path}: verify steps from {source}; heads pass {heads_ms:.2f} ms"
               + (f"; {skipped} rows with trees larger than the timed {largest} nodes skipped" if skipped else ""))
    click.echo(format_tree_plan(plan[:PLAN_ROWS]))
    if best is None:
        click.echo("no method of the study fits the verify-cost curve")
    elif best["predicted_speedup"] <= 1.0:
        click.echo(f"\nno configuration beats plain decoding here (best {best['predicted_speedup']:.3f}x): do not speculate")
    else:
        click.echo(f"\nbest: {best['method']} at depth {best['depth']}, predicted {best['predicted_speedup']:.3f}x:\n"
                   f"  specdec decode --drafter '{best['drafter']}' --gamma {best['gamma']} --temperature 0")
