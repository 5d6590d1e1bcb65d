"""The plan of `specdec plan --from`: a serving engine's measured acceptance in, the optimal draft
length out, with a batch cost table the best draft length per batch-size range.

Names follow Leviathan et al. (ICML 2023): `alpha` (alpha_i per position), `gamma` draft length, `c`
draft/target time ratio. Acceptance comes from an engine's counts (`specdec.engines.acceptance`);
the plan is `simulator.plan` with per-position acceptance, the batch table `simulator.batch`
(`simulator.equal_split` for an engine that splits its batches). The search covers the observed
draft lengths only, unless asked to extrapolate (alpha_i beyond them = the last observed, flagged).
A drafter that drafts on a share s of the steps only (an n-gram lookup that finds no match on the
others: a plain step) is priced exactly by `drafting_on_a_share`. Pure numpy.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

from specdec.simulator.batch import BatchPlan, BatchTimes, batch_plan, gamma_ranges
from specdec.simulator.equal_split import equal_split_plan
from specdec.simulator.counts import Acceptance
from specdec.simulator.plan import Plan, make_plan

EXTRAPOLATE_MAX = 16  # draft lengths searched when extrapolating without a max_gamma
RANGE_TOLERANCE = 0.02  # a longer draft must beat a shorter one by 2% to take a batch size (timing noise)


@dataclass(frozen=True)
class EnginePlan:
    """One engine's acceptance, the plan over gamma = 0..plan.max_gamma, and the batch table."""

    source: str  # the engine output the counts came from, e.g. "vllm-prometheus"
    acceptance: Acceptance  # alpha_1..alpha_K with 95% intervals
    plan: Plan  # per-position plan; plan.optimal_gamma is the draft length to configure
    verify_cost_source: str | None  # where plan.verify_cost came from when derived here (the batch times), else None
    batch_times: BatchTimes | None  # measured t(B, k), when given
    batch: BatchPlan | None  # speedup [nB, G_B + 1] per timed batch size and gamma, when batch times are given
    gamma_ranges: tuple[tuple[int, int, int], ...] | None  # (first B, last B, best gamma), smallest to largest timed B
    range_tolerance: float  # relative margin a longer draft needs to take a batch size
    # (context, its gamma ranges) for every context the batch cost file timed, when it timed several
    context_ranges: tuple[tuple[int, tuple[tuple[int, int, int], ...]], ...] = ()
    draft_share: float | None = None  # the share of steps that draft, when below 1 (the plan prices it)
    equal_split: bool = False  # the batch table priced by the engine's equal micro-batches (simulator.equal_split)

    @property
    def positions_observed(self) -> int:
        """Draft lengths the counts cover: gamma beyond them reuses the last alpha_i (extrapolated)."""
        return self.acceptance.k_observed

    @property
    def extrapolated(self) -> bool:
        """Whether the search went past the observed draft lengths."""
        return self.plan.max_gamma > self.positions_observed

    def best_batch_gamma(self) -> list[int]:
        """The best gamma per timed batch size (ties within `range_tolerance` go to the shorter draft)."""
        return [] if self.batch is None else self.batch.best_gamma(self.range_tolerance).tolist()


def drafting_on_a_share(alphas: Sequence[float], c: float, verify_cost: Sequence[float] | None, share: float
                        ) -> tuple[tuple[float, ...], float, tuple[float, ...] | None]:
    """(alpha', c', v') under which drafting at every step equals drafting on a share s of the
    steps with (alpha, c, v), a plain step on the others: per step E = 1 + s sum_i prod_{j<=i}
    alpha_j tokens in (1 - s) + s (gamma c + v(gamma + 1)) target steps, which is every-step
    drafting with alpha'_1 = s alpha_1 (the other alpha_i kept), c' = s c and v'(k) = 1 - s + s v(k)."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"a draft share must lie in (0, 1], got {share}")
    scaled = (share * alphas[0], *alphas[1:])
    v = None if verify_cost is None else tuple(1.0 - share + share * float(x) for x in verify_cost)
    return tuple(float(a) for a in scaled), share * c, v


def engine_plan(acceptance: Acceptance, c: float, source: str, max_gamma: int | None = None,
                extrapolate: bool = False, verify_cost: Sequence[float] | None = None,
                batch_times: BatchTimes | None = None, context_tables: Sequence[BatchTimes] = (),
                draft_share: float | None = None, equal_split: bool = False) -> EnginePlan:
    """Plan from measured acceptance.

    Args:
        acceptance: alpha_1..alpha_K from an engine's counts.
        c: draft/target time ratio, >= 0.
        source: the engine output the counts came from (reported).
        max_gamma: bound of the search; default the observed draft lengths (EXTRAPOLATE_MAX
            when extrapolating). Without `extrapolate` it is capped at the observed ones.
        verify_cost: v(1..K) with v(1) = 1; it caps the search at K - 1. Without it, batch times
            that start at B = 1 give v(k) = t(1, k) / t(1, 1), floored at 1 (timing noise).
        batch_times: measured t(B, k): adds the batch table and the best gamma per batch-size range.
        context_tables: t(B, k) timed at several context lengths: adds the best gamma per
            batch-size range at each of them (batch_times is then the one at the stated context).
        draft_share: the share of the target's steps that verified a draft (None or 1: all);
            the single-sequence plan prices the plain steps between drafts, the batch table too
            when `equal_split`, else it assumes every step drafts.
        equal_split: the engine decodes a batch whose slots feed unequal counts as equal
            micro-batches (llama.cpp with -np B): the batch table and ranges priced by
            `simulator.equal_split`, every slot drafting on the share independently, and by the
            speculating servers' own steps where the times hold them (`BatchTimes.mixed`).
    """
    curve_note = None
    if verify_cost is None and batch_times is not None and batch_times.batch_sizes[0] == 1:
        row = batch_times.seconds[0]
        verify_cost = tuple(max(1.0, t / row[0]) for t in row)
        curve_note = "verify cost v(k) = t(1, k) / t(1, 1) from the batch cost file"
    observed = acceptance.k_observed
    top = max_gamma if max_gamma is not None else (EXTRAPOLATE_MAX if extrapolate else observed)
    if not extrapolate:
        top = min(top, observed)
    if verify_cost is not None:
        top = min(top, len(verify_cost) - 1)
    share = draft_share if draft_share is not None and 0.0 < draft_share < 1.0 else None
    alphas, c_step, v_step = ((acceptance.alphas, c, verify_cost) if share is None else
                              drafting_on_a_share(acceptance.alphas, c, verify_cost, share))
    plan = make_plan(c=c_step, alpha_per_position=alphas, max_gamma=top, verify_cost=v_step)
    batch = ranges = None

    def table(times: BatchTimes):  # the batch table's pricing of these times
        return functools.partial(equal_split_plan, share=share, mixed=times.mixed_steps()) if equal_split \
            else batch_plan

    def between(times: BatchTimes) -> tuple[tuple[int, int, int], ...]:
        return tuple(gamma_ranges(acceptance.alphas, times.batch_sizes, times.seconds, c,
                                  min(top, len(times.seconds[0]) - 1), RANGE_TOLERANCE, table(times)))

    if batch_times is not None:
        batch = table(batch_times)(acceptance.alphas, batch_times.batch_sizes, batch_times.seconds, c,
                                   min(top, len(batch_times.seconds[0]) - 1))
        ranges = between(batch_times)
    by_context = tuple((t.context_tokens, between(t)) for t in context_tables)
    return EnginePlan(source, acceptance, plan, curve_note, batch_times, batch, ranges, RANGE_TOLERANCE, by_context,
                      share, equal_split)
