"""Planning parallel drafts (token trees) from a lattice study: which (method, k, p, depth h)
is fastest. An iteration verifies the pending token and the N nodes of the draft tree in one
target pass and drafts once, so

    predicted speedup = block efficiency * t(0) / (t(N) + t_draft + t_choose),

t(N) the verify step with N draft nodes (linearly interpolated between measured sizes; t(0) a
plain decoding step), t_draft the drafter's pass (the heads' top-k, the same for every row; plus
a row's own `draft_ms` where drafting differs by shape: the feature draft's trees take one layer
call per depth), t_choose the method's path search per block. t(N) comes either from verify
steps timed directly on trees, or from a verify-cost curve: t(N) = t(1 token) * v(N + 1), since
a tree pass over N + 1 tokens costs what a chain pass over as many tokens does (measured:
docs/heads.md). Pure numpy; the report renders the plan (`specdec.report`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from specdec.errors import SpecdecError


@dataclass(frozen=True)
class TreeRow:
    """One (method, depth h) of a lattice study, planned (values as the study holds them)."""

    method: str  # the study's method, e.g. "2-gram parallel p=4"
    depth: int | None  # draft depth h the trees are cut to; the decode's --gamma
    block_efficiency: float  # mean tokens per iteration, incl. the target's own token
    tree_tokens: float  # mean draft nodes N per tree
    iteration_ms: float  # predicted iteration, t(N) + t_draft + t_choose, milliseconds
    predicted_speedup: float  # block_efficiency * t(0) / iteration


@dataclass(frozen=True)
class TreePlan:
    """Every realizable row of a lattice study, best first."""

    rows: tuple[TreeRow, ...]  # sorted by predicted_speedup, highest first (stable)
    step_seconds: Mapping[int, float]  # {N: t(N)} the plan interpolated, N = 0 a plain decoding step
    draft_seconds: float  # t_draft, the drafter's pass per iteration
    skipped_larger_trees: int  # rows whose trees exceed the largest timed N (skipped, when asked to)

    @property
    def best(self) -> TreeRow | None:
        """The fastest row, or None when no row could be planned."""
        return self.rows[0] if self.rows else None

    @property
    def largest_timed(self) -> int:
        """The largest tree (draft nodes N) with a timed verify step."""
        return max(self.step_seconds)


def steps_from_curve(step_seconds: float, verify_cost: Sequence[float]) -> dict[int, float]:
    """{N: t(N)} from a verify-cost curve v(1..K): N draft nodes ride in a pass over N + 1 tokens."""
    if step_seconds <= 0 or not verify_cost:
        raise SpecdecError("need a positive step time and a non-empty verify-cost curve")
    return {k - 1: step_seconds * float(v) for k, v in enumerate(verify_cost, start=1)}


def plan_trees(rows: Sequence[Mapping[str, Any]], step_seconds: Mapping[int, float], draft_seconds: float,
               skip_larger: bool = False) -> TreePlan:
    """Predicted speedup of every realizable row (method, depth) of a lattice study, best first.

    rows: dicts with method, block_efficiency, tree_tokens and choose_ms (depth and draft_ms optional; rows
    whose tree_tokens or choose_ms is None, the oracle's, are skipped); step_seconds {N: t(N)}
    with N = 0 and sizes up to the largest tree; draft_seconds t_draft. A tree larger than the
    timed sizes is an error, or counted in `skipped_larger_trees` with skip_larger."""
    if 0 not in step_seconds:
        raise SpecdecError("step_seconds needs t(0), a plain decoding step")
    sizes = np.array(sorted(step_seconds), dtype=np.float64)
    t = np.array([step_seconds[int(n)] for n in sizes])
    planned, skipped = [], 0
    for r in rows:
        if r.get("tree_tokens") is None:
            continue
        if skip_larger and r["tree_tokens"] > sizes[-1]:
            skipped += 1
            continue
        if r.get("choose_ms") is None:
            continue
        if r["tree_tokens"] > sizes[-1]:
            raise SpecdecError(f"{r['method']}: trees of {r['tree_tokens']:.1f} nodes exceed the timed "
                               f"{sizes[-1]:.0f}")
        iteration = (float(np.interp(r["tree_tokens"], sizes, t)) + draft_seconds + r.get("draft_ms", 0.0) / 1000
                     + r["choose_ms"] / 1000)
        planned.append(TreeRow(r["method"], r.get("depth"), r["block_efficiency"], r["tree_tokens"], 1000 * iteration,
                               r["block_efficiency"] * step_seconds[0] / iteration))
    return TreePlan(tuple(sorted(planned, key=lambda row: -row.predicted_speedup)), dict(step_seconds), draft_seconds,
                    skipped)
