"""Every rendering of a plan: JSON-ready values, text and Markdown, for `Plan` (`specdec plan`),
`EnginePlan` with its `BatchPlan` and the engine configuration (`specdec plan --from`) and
`TreePlan` (`specdec plan --trees`, `specdec heads lattice`). torch-free; imports only the
standard library, the simulator and (for an engine's own configuration lines) the engine registry.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` (`c_hat`) draft/target time (arithmetic) ratio. The JSON functions return plain
values (the command line serialises them strictly); each text function renders those same
values, so text and JSON never disagree.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from specdec.simulator.counts import Acceptance
from specdec.simulator.engine_plan import EnginePlan
from specdec.simulator.plan import Plan
from specdec.simulator.trees import TreePlan

ROWS_PAST_BEST = 3  # rows shown past the larger of the optimal and the asked-for gamma in `plan_text`
TREE_ROWS = 12  # best (method, depth) rows a tree table shows; the JSON holds all
EXTRAPOLATED = "  (extrapolated: alpha_i beyond the observed positions = the last observed)"


# --- Plan (`specdec plan`) ---

def plan_row(plan: Plan, gamma: int) -> dict[str, float | int]:
    """One row of the per-gamma table as plain Python numbers."""
    return {"gamma": int(plan.gammas[gamma]),
            "expected_tokens": float(plan.expected_tokens[gamma]),
            "speedup": float(plan.walltime_improvement[gamma]),
            "op_increase": float(plan.operation_increase[gamma]),
            "memory_reduction": float(plan.memory_access_reduction[gamma])}


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready values; the evaluated gamma's row is at the top level."""
    oracle = None
    if plan.oracle_expected_tokens is not None:
        oracle = {"expected_tokens": plan.oracle_expected_tokens, "speedup": plan.oracle_walltime_improvement}
    return {
        "alpha": plan.alpha,
        "alpha_per_position": None if plan.alpha_per_position is None else list(plan.alpha_per_position),
        "c": plan.c,
        "c_hat": plan.c_hat,
        "verify_cost": None if plan.verify_cost is None else list(plan.verify_cost),
        "max_gamma": plan.max_gamma,
        **plan_row(plan, plan.gamma),
        "gamma_is_optimal": plan.gamma == plan.optimal_gamma,
        "optimal_gamma": plan.optimal_gamma,
        "optimal_speedup": float(plan.walltime_improvement[plan.optimal_gamma]),
        "speculation_helps": plan.speculation_helps,
        "gamma1_speedup": plan.gamma1_walltime_improvement,
        "oracle": oracle,
        "table": [plan_row(plan, g) for g in range(plan.gammas.size)],
    }


def plan_text(plan: Plan) -> str:
    """The human-readable report of `specdec plan`: the evaluated gamma, then the table up to
    ROWS_PAST_BEST rows past the larger of the optimal and the evaluated gamma."""
    d = plan_dict(plan)
    acceptance = (f"alpha = {plan.alpha:g} (i.i.d.)" if plan.alpha is not None else
                  "alpha_i = " + ",".join(f"{a:g}" for a in plan.alpha_per_position) + " (per position)")
    cost = ("v(k) = 1 (paper)" if plan.verify_cost is None else
            f"v(1..{len(plan.verify_cost)}) = " + ",".join(f"{v:g}" for v in plan.verify_cost))
    which = "optimal" if d["gamma_is_optimal"] else f"given; optimal is {plan.optimal_gamma}"
    iid = plan.alpha is not None  # else per-position acceptances, an extension of the paper
    timed_as_paper = iid and plan.verify_cost is None  # else a verify-cost curve as well

    def ref(source: str, as_paper: bool = iid) -> str:
        return f"({source})" if as_paper else "(extended model)"

    lines = [
        f"{acceptance}, c = {plan.c:g}, c_hat = {plan.c_hat:g}, verify cost {cost}",
        f"gamma = {plan.gamma} ({which}, searched 0..{plan.max_gamma}):",
        f"  expected tokens per iteration  {d['expected_tokens']:.3f}   {ref('Eq. 1')}, incl. the target's token",
        f"  walltime improvement           {d['speedup']:.3f}X  {ref('Theorem 8', timed_as_paper)}",
        f"  arithmetic operations          {d['op_increase']:.3f}X  {ref('Theorem 10')}",
        f"  target memory reads            {d['memory_reduction']:.3f}X fewer  {ref('Section 3.4')}",
        f"some gamma in 1..{plan.max_gamma} beats plain decoding: {'yes' if d['speculation_helps'] else 'no'}"
        + ("" if d["gamma1_speedup"] is None else
           f"; at gamma = 1 the speedup is {d['gamma1_speedup']:.3f}X {ref('Corollary 9', timed_as_paper)}"),
    ]
    if d["oracle"] is not None:
        oracle_speedup = d["oracle"]["speedup"]
        lines.append(f"oracle gamma (Section 3.5): {d['oracle']['expected_tokens']:.3f} tokens per iteration"
                     + ("" if oracle_speedup is None else f", speedup {oracle_speedup:.3f}X"))
    lines += ["", f"{'gamma':>5}  {'tokens/iter':>11}  {'speedup':>8}  {'operations':>10}  {'memory reads':>12}"]
    last = min(len(d["table"]) - 1, max(plan.optimal_gamma, plan.gamma) + ROWS_PAST_BEST)
    for row in d["table"][:last + 1]:
        mark = "  <- best" if row["gamma"] == plan.optimal_gamma else ""
        lines.append(f"{row['gamma']:>5}  {row['expected_tokens']:>11.3f}  {row['speedup']:>7.3f}X  "
                     f"{row['op_increase']:>9.3f}X  {row['memory_reduction']:>11.3f}X{mark}")
    return "\n".join(lines)


# --- EnginePlan (`specdec plan --from`) ---

def acceptance_dict(acceptance: Acceptance) -> dict[str, Any]:
    """alpha_i with their 95% intervals, the model and the counts, as JSON-ready values."""
    return {"alpha_per_position": list(acceptance.alphas),
            "alpha_per_position_ci": [None if i is None else list(i) for i in acceptance.intervals],
            "model": acceptance.model, "positions_observed": acceptance.k_observed, "counts": acceptance.counts}


def engine_plan_dict(engine_plan: EnginePlan, config: Mapping[str, Any] | None = None,
                     figure: str | None = None) -> dict[str, Any]:
    """Everything `specdec plan --from` reports: the acceptance, the plan (rows past the observed
    draft lengths flagged "extrapolated"), the batch table, the engine configuration and the figure."""
    observed = engine_plan.positions_observed
    plan = plan_dict(engine_plan.plan)
    for row in plan["table"]:
        row["extrapolated"] = row["gamma"] > observed
    result: dict[str, Any] = {"source": engine_plan.source, "acceptance": acceptance_dict(engine_plan.acceptance),
                              "plan": plan, "positions_observed": observed, "extrapolated": engine_plan.extrapolated,
                              "verify_cost_source": engine_plan.verify_cost_source,
                              "draft_share": engine_plan.draft_share}
    batch, times = engine_plan.batch, engine_plan.batch_times
    if batch is not None and times is not None:
        result["batch"] = {"batch_sizes": list(times.batch_sizes), "gammas": list(range(batch.speedup.shape[1])),
                           "speedup": batch.speedup.tolist(), "throughput": batch.throughput.tolist(),
                           "latency": batch.latency.tolist(), "best_gamma": engine_plan.best_batch_gamma(),
                           "tolerance": engine_plan.range_tolerance,
                           "ranges": [list(r) for r in engine_plan.gamma_ranges or ()], "device": times.device,
                           "context_tokens": times.context_tokens, "equal_split": engine_plan.equal_split,
                           "mixed_k": [k for k, _ in times.mixed if engine_plan.equal_split
                                       and k <= batch.speedup.shape[1]],
                           "ranges_by_context": [{"context": n, "ranges": [list(r) for r in ranges]}
                                                 for n, ranges in engine_plan.context_ranges]}
    if config is not None:
        result["engine_config"] = dict(config)
    if figure is not None:
        result["figure"] = figure
    return result


def engine_plan_text(engine_plan: EnginePlan, config: Mapping[str, Any] | None = None,
                     figure: str | None = None) -> str:
    """The text report of `specdec plan --from` (engine counts -> plan -> configuration)."""
    r = engine_plan_dict(engine_plan, config, figure)
    acc, plan = r["acceptance"], r["plan"]
    lines = [f"source: {r['source']}; acceptance model: {acc['model']}"]
    lines.append("alpha_i (95% CI): " + "  ".join(
        f"{i}: {a:.3f} " + ("[no interval: no counts]" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]")
        for i, (a, ci) in enumerate(zip(acc["alpha_per_position"], acc["alpha_per_position_ci"]), 1)))
    lines.append(f"c = {plan['c']:g}" + ("" if plan["verify_cost"] is None else
                                         ", verify cost v(1..) = " + ",".join(f"{v:.2f}" for v in plan["verify_cost"]))
                 + (f" ({r['verify_cost_source']})" if r["verify_cost_source"] else ""))
    if r["draft_share"] is not None:
        lines.append(f"drafts on {100 * r['draft_share']:.1f}% of the target's steps, s: the table prices the plain "
                     "steps between drafts (c and v above are per step: s c, 1 - s + s v(k)); the batch table "
                     + ("too, every slot drafting on that share" if r.get("batch", {}).get("equal_split")
                        else "assumes a draft every step"))
    lines.append(f"{'gamma':>5}  {'tokens/iter':>11}  {'speedup':>8}")
    for row in plan["table"]:
        mark = "  <- best" if row["gamma"] == plan["optimal_gamma"] else ""
        flag = EXTRAPOLATED if row["extrapolated"] else ""
        lines.append(f"{row['gamma']:>5}  {row['expected_tokens']:>11.3f}  {row['speedup']:>7.3f}X{mark}{flag}")
    if plan["optimal_gamma"] == 0:
        lines.append("no draft length beats plain decoding: do not speculate")
    if "batch" in r:
        lines += _batch_lines(r["batch"])
    if "engine_config" in r:
        lines += [""] + engine_config_lines(r["engine_config"])
    if "figure" in r:
        lines.append(f"figure: {r['figure']}")
    return "\n".join(lines)


def _batch_lines(b: Mapping[str, Any]) -> list[str]:
    """The speedup table per batch size and the best draft length per batch-size range."""
    lines = [f"\nspeedup by batch size (t(B, k) measured on {b['device']} at {b['context_tokens']} tokens of context"
             + ("; priced as the engine decodes B slots, equal micro-batches: a slot that drafts beside one that "
                "does not costs one more decode" if b.get("equal_split") else "")
             + (", gamma = " + ", ".join(str(k - 1) for k in b["mixed_k"]) + " by the speculating servers' own "
                "mixed steps" + (", the others by steps timed on other servers (docs/engines.md)"
                                 if len(b["mixed_k"]) < len(b["gammas"]) - 1 else "") if b.get("mixed_k") else "")
             + "):",
             f"{'B':>5}  " + "  ".join(f"g={g:<4d}" for g in b["gammas"]) + "  best"]
    for size, row, best in zip(b["batch_sizes"], b["speedup"], b["best_gamma"]):
        lines.append(f"{size:>5}  " + "  ".join(f"{x:6.3f}" for x in row) + f"  {best}")
    lines.append(f"best draft length per batch-size range (a longer draft must win by {100 * b['tolerance']:.0f}%): "
                 + ", ".join(f"{a}-{e}: {g}" for a, e, g in b["ranges"])
                 + f" (batch sizes above {b['batch_sizes'][-1]} were not timed)")
    for row in b.get("ranges_by_context", []):
        lines.append(f"  at {row['context']} tokens of context: " + ", ".join(f"{a}-{e}: {g}" for a, e, g in row["ranges"]))
    return lines


def engine_config_lines(config: Mapping[str, Any]) -> list[str]:
    """The configuration to paste (`specdec.engines.configs.engine_config`), as text lines: the
    engine's own lines (its `config_lines`, through the registry), then the note."""
    from specdec.engines.registry import get

    if not config["speculate"]:
        return [f"{config['engine']}: {config['note']}"]
    lines = get(config["engine"]).config_lines(config)
    if config.get("note"):
        lines.append(f"note: {config['note']}")
    return lines


# --- TreePlan (`specdec plan --trees`, `specdec heads lattice`) ---

def tree_rows(tree_plan: TreePlan) -> list[dict[str, Any]]:
    """The planned rows, best first, as JSON-ready values (a lattice study's "plan")."""
    return [{"method": r.method, "depth": r.depth, "block_efficiency": r.block_efficiency,
             "tree_tokens": r.tree_tokens, "iteration_ms": r.iteration_ms, "predicted_speedup": r.predicted_speedup}
            for r in tree_plan.rows]


def tree_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The first TREE_ROWS of the JSON rows (`tree_rows`) as a Markdown table."""
    lines = ["| method | depth h | block efficiency | tree tokens | iteration ms | predicted speedup |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['depth']} | {r['block_efficiency']:.3f} | {r['tree_tokens']:.1f} | "
              f"{r['iteration_ms']:.1f} | {r['predicted_speedup']:.3f}x |" for r in rows[:TREE_ROWS]]
    return "\n".join(lines)


def drafter_spec(study: Mapping[str, Any], method: str) -> str:
    """The `--drafter` spec that decodes with one method of a lattice study (its row options)."""
    options = {row["method"]: row.get("options") or {} for row in study["by_depth"]}.get(method, {})
    spec = f"heads:{study.get('heads_path', '<heads folder>')}"
    rescorer = options.get("rescorer")
    if options.get("p", 1) > 1 or rescorer is not None:
        spec += f",k={study['k']}" + (f",p={options['p']}" if options.get("p", 1) > 1 else "")
    if rescorer is not None:
        kind, path = (study.get("rescorers") or {}).get(rescorer, ("ngram", f"<{rescorer}>"))
        spec += f",{kind}={path},w={options['w']:g}" + (",rescore=local" if options.get("rescore") == "local" else "")
    return spec


def tree_plan_dict(tree_plan: TreePlan, study: Mapping[str, Any], study_path: str, verify_steps: str,
                   draft_ms: float) -> dict[str, Any]:
    """Everything `specdec plan --trees` reports: each row with the drafter spec and --gamma that
    decode with it, the best first; study_path and verify_steps say where the inputs came from."""
    rows = [row | {"drafter": drafter_spec(study, row["method"]), "gamma": row["depth"]}
            for row in tree_rows(tree_plan)]
    return {"study": study_path, "verify_steps": verify_steps, "draft_ms": draft_ms,
            "skipped_larger_trees": tree_plan.skipped_larger_trees, "best": rows[0] if rows else None, "plan": rows}


def tree_plan_text(tree_plan: TreePlan, study: Mapping[str, Any], study_path: str, verify_steps: str,
                   draft_ms: float) -> str:
    """The text report of `specdec plan --trees`: the table, then the command that decodes with the best row."""
    r = tree_plan_dict(tree_plan, study, study_path, verify_steps, draft_ms)
    skipped, best = r["skipped_larger_trees"], r["best"]
    lines = [f"tree plan from {study_path}: verify steps from {verify_steps}; heads pass {draft_ms:.2f} ms"
             + (f"; {skipped} rows with trees larger than the timed {tree_plan.largest_timed} nodes skipped"
                if skipped else ""),
             tree_table(r["plan"])]
    if best is None:
        lines.append("no method of the study fits the verify-cost curve")
    elif best["predicted_speedup"] <= 1.0:
        lines.append(f"\nno configuration beats plain decoding here (best {best['predicted_speedup']:.3f}x): "
                     "do not speculate")
    else:
        lines.append(f"\nbest: {best['method']} at depth {best['depth']}, predicted {best['predicted_speedup']:.3f}x:\n"
                     f"  specdec decode --drafter '{best['drafter']}' --gamma {best['gamma']} --temperature 0")
    return "\n".join(lines)
