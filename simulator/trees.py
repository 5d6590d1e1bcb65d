"""Planning parallel drafts (token trees) from a lattice study: which (method, k, p, depth h)
is fastest. An iteration verifies the pending token and the N nodes of the draft tree in one
target pass and drafts once, so

    predicted speedup = block efficiency * t(0) / (t(N) + t_draft + t_choose),

t(N) the verify step with N draft nodes (linearly interpolated between measured sizes; t(0) a
plain decoding step), t_draft the drafter's pass (the heads' top-k), t_choose the method's path
search per block. t(N) comes either from verify steps timed directly on trees, or from a
verify-cost curve: t(N) = t(1 token) * v(N + 1), since a tree pass over N + 1 tokens costs what
a chain pass over as many tokens does (measured: docs/heads.md). Pure numpy.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


def steps_from_curve(step_seconds: float, verify_cost: Sequence[float]) -> dict[int, float]:
    """{N: t(N)} from a verify-cost curve v(1..K): N draft nodes ride in a pass over N + 1 tokens."""
    if step_seconds <= 0 or not verify_cost:
        raise ValueError("need a positive step time and a non-empty verify-cost curve")
    return {k - 1: step_seconds * float(v) for k, v in enumerate(verify_cost, start=1)}


def plan_trees(rows: Sequence[Mapping[str, Any]], step_seconds: Mapping[int, float], draft_seconds: float
               ) -> list[dict[str, Any]]:
    """Predicted speedup of every realizable row (method, depth) of a lattice study, best first.

    rows: dicts with method, block_efficiency, tree_tokens and choose_ms (depth optional; rows
    whose tree_tokens or choose_ms is None, the oracle's, are skipped); step_seconds {N: t(N)}
    with N = 0 and sizes up to the largest tree. A tree larger than the timed sizes is an error."""
    if 0 not in step_seconds:
        raise ValueError("step_seconds needs t(0), a plain decoding step")
    sizes = np.array(sorted(step_seconds), dtype=np.float64)
    t = np.array([step_seconds[int(n)] for n in sizes])
    out = []
    for r in rows:
        if r.get("choose_ms") is None or r.get("tree_tokens") is None:
            continue
        if r["tree_tokens"] > sizes[-1]:
            raise ValueError(f"{r['method']}: trees of {r['tree_tokens']:.1f} nodes exceed the timed "
                             f"{sizes[-1]:.0f}")
        iteration = float(np.interp(r["tree_tokens"], sizes, t)) + draft_seconds + r["choose_ms"] / 1000
        out.append({"method": r["method"], "depth": r.get("depth"), "block_efficiency": r["block_efficiency"],
                    "tree_tokens": r["tree_tokens"], "iteration_ms": 1000 * iteration,
                    "predicted_speedup": r["block_efficiency"] * step_seconds[0] / iteration})
    return sorted(out, key=lambda row: -row["predicted_speedup"])


PLAN_ROWS = 12  # best (method, depth) rows a table shows; JSON holds all


def format_tree_plan(rows: Sequence[Mapping[str, Any]]) -> str:
    """The tree plan as a Markdown table."""
    lines = ["| method | depth h | block efficiency | tree tokens | iteration ms | predicted speedup |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['depth']} | {r['block_efficiency']:.3f} | {r['tree_tokens']:.1f} | "
              f"{r['iteration_ms']:.1f} | {r['predicted_speedup']:.3f}x |" for r in rows]
    return "\n".join(lines)
