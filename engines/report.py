"""The text report of `specdec plan --from` (engine counts -> plan -> configuration)."""
from __future__ import annotations

from typing import Any


def format_engine_plan(r: dict[str, Any]) -> str:
    acc, plan = r["acceptance"], r["plan"]
    lines = [f"source: {r['source']}; acceptance model: {acc['model']}"]
    lines.append("alpha_i (95% CI): " + "  ".join(
        f"{i}: {a:.3f} [{lo:.3f}, {hi:.3f}]" for i, (a, (lo, hi)) in
        enumerate(zip(acc["alpha_per_position"], acc["alpha_per_position_ci"]), 1)))
    lines.append(f"c = {plan['c']:g}" + ("" if plan["verify_cost"] is None else
                                         ", verify cost v(1..) = " + ",".join(f"{v:.2f}" for v in plan["verify_cost"]))
                 + (f" ({r['verify_cost_source']})" if r.get("verify_cost_source") else ""))
    lines.append(f"{'gamma':>5}  {'tokens/iter':>11}  {'speedup':>8}")
    for row in plan["table"]:
        mark = "  <- best" if row["gamma"] == plan["optimal_gamma"] else ""
        flag = "  (extrapolated: alpha_i beyond the observed positions = the last observed)" if row["extrapolated"] else ""
        lines.append(f"{row['gamma']:>5}  {row['expected_tokens']:>11.3f}  {row['speedup']:>7.3f}X{mark}{flag}")
    if plan["optimal_gamma"] == 0:
        lines.append("no draft length beats plain decoding: do not speculate")
    if "batch" in r:
        b = r["batch"]
        lines.append(f"\nspeedup by batch size (t(B, k) measured on {b['device']} at {b['context_tokens']} tokens of context):")
        lines.append(f"{'B':>5}  " + "  ".join(f"g={g:<4d}" for g in b["gammas"]) + "  best")
        for size, row, best in zip(b["batch_sizes"], b["speedup"], b["best_gamma"]):
            lines.append(f"{size:>5}  " + "  ".join(f"{x:6.3f}" for x in row) + f"  {best}")
        lines.append(f"best draft length per batch-size range (a longer draft must win by {100 * b['tolerance']:.0f}%): "
                     + ", ".join(
            f"{a}-{e}: {g}" for a, e, g in b["ranges"]) + f" (batch sizes above {b['batch_sizes'][-1]} were not timed)")
    if "engine_config" in r:
        cfg = r["engine_config"]
        lines.append("")
        if not cfg["speculate"]:
            lines.append(f"{cfg['engine']}: {cfg['note']}")
        elif cfg["engine"] == "vllm":
            lines.append(f"vLLM: {cfg['flag']}")
        elif cfg["engine"] == "llamacpp":
            lines.append(f"llama.cpp: {cfg['flags']}   (newer builds: {cfg['flags_newer']})")
        else:
            lines.append("transformers generate(..., " + ", ".join(f"{k}={v!r}" for k, v in cfg["generate_kwargs"].items())
                         + ")")
        if cfg.get("note") and cfg["speculate"]:
            lines.append(f"note: {cfg['note']}")
    if "figure" in r:
        lines.append(f"figure: {r['figure']}")
    return "\n".join(lines)
