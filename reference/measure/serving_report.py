"""serve.md: the tables of `specdec serve-bench` (`specdec.reference.measure.serving`) in Markdown."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


def serve_markdown(result: Mapping[str, Any]) -> str:
    """t(B, k, L) per context, then per method and batch size the measured and predicted
    throughput speedup, throughput, latency and goodput, and the crossovers."""
    c = result["config"]
    lines = [f"# Ragged batched decoding: {c['layout']} layout, greedy, {c['new_tokens']} tokens a request, "
             f"{c['prompts']} prompts per context, {c['blocks']} blocks, goodput bound {c['slo_ms']:g} ms per token", ""]
    for ctx in result["contexts"]:
        t = ctx["timing"]
        lines += [f"## Context {ctx['context']} tokens (t(B, k) timed at {ctx['timed_at']})", "",
                  "| B | " + " | ".join(f"t(B,{k}) ms" for k in range(1, len(t["seconds"][0]) + 1)) + " |",
                  "|---|" + "---|" * len(t["seconds"][0])]
        lines += [f"| {b} | " + " | ".join(f"{1000 * s:.1f}" for s in row) + " |"
                  for b, row in zip(t["batch_sizes"], t["seconds"])]
        for name, steps in (ctx.get("draft_step_seconds") or {}).items():
            lines += ["", f"Draft model {name}, one step of every row (forward and pick, timed before each block of "
                          "that B's decodes, the median over the blocks): "
                      + ", ".join(f"t_d({b}, 1..2) {1000 * s[0]:.2f} / {1000 * s[1]:.2f} ms" for b, s in steps.items())
                      + " (a pass's drafting: a forward over what the verdicts committed, then one of one token per "
                        "further token of the longest proposal)", "", "| method | B | drafting a pass, measured ms | predicted ms | error |",
                      "|---|---|---|---|---|"]
            lines += [f"| {m['method']} | {p['batch']} | {1000 * p['draft_pass_seconds']:.2f} | "
                      f"{1000 * p['predicted_draft_seconds']:.2f} | "
                      f"{100 * (p['predicted_draft_seconds'] / p['draft_pass_seconds'] - 1):+.1f}% |"
                      for m in ctx["methods"] if m["method"].startswith(f"{name} gamma=") for p in m["points"]
                      if p["draft_pass_seconds"] > 0]
        lines += ["", "| method | B | measured speedup [95% CI] | predicted | error | tokens/s | predicted tokens/s | "
                  "p50 ms (pred) | p99 ms (measured only) | goodput tokens/s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for m in ctx["methods"]:
            for p in m["points"]:
                lines.append(
                    f"| {m['method']} | {p['batch']} | {p['speedup']:.3f} [{p['ci'][0]:.3f}, {p['ci'][1]:.3f}] | "
                    f"{p['predicted_speedup']:.3f} | {100 * p['error']:+.1f}% | {p['throughput']:.1f} | "
                    f"{p['predicted_throughput']:.1f} | {1000 * p['latency_p50']:.0f} ({1000 * p['predicted_p50']:.0f}) | "
                    f"{1000 * p['latency_p99']:.0f} | {p['goodput']:.1f} |")
        lines += ["", "p99 is measured only: the model predicts the pass widths' spread, not the time of one "
                  "pass's (`specdec.reference.measure.serving`)."]
        lines += ["", "| method | speculation stops paying from B on (measured) | (where the 95 % intervals "
                  "let it lie) | (predicted) |", "|---|---|---|---|"]
        lines += [f"| {m['method']} | {_b(m['crossover'])} | {_range(m['crossover_range'])} | "
                  f"{_b(m['predicted_crossover'])} |"
                  for m in ctx["methods"] if m["method"] != "baseline"]
        lines.append("")
    return "\n".join(lines)


def _b(b: int | None) -> str:
    return "still pays at the largest B run" if b is None else str(b)


def _range(ends: Sequence[int | None]) -> str:
    """A crossover range (`simulator.ragged.crossover_range`) in words."""
    low, high = (("past the largest B" if b is None else str(b)) for b in ends)
    return f"{low} (decided)" if low == high else f"{low} to {high}"
