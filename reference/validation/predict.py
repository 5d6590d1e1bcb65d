"""Predicted vs measured for one configuration: the three predictions, the measured speedup
with its bootstrap interval, and the agreement of the decode's alpha with the estimator's
(docs/validation.md). The prediction maths is `specdec.simulator.prediction`."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from specdec.reference.core.stats import DecodeStats
from specdec.reference.estimate.alpha import AlphaEstimate
from specdec.reference.estimate.cost import CostEstimate
from specdec.reference.estimate.replay import replay
from specdec.reference.measure.bootstrap import bootstrap_ratio_ci
from specdec.reference.measure.harness import Run
from specdec.reference.measure.speedup import speedup
from specdec.reference.validation.rows import PlanEntry, ValidationRow
from specdec.simulator import make_plan, positional_expected_tokens, walltime_improvement
from specdec.simulator.prediction import budgeted_speedup, effective_cost, mean_iteration_time, survival_acceptance


def window_alpha(alpha: AlphaEstimate, new_tokens: int, deterministic: bool, rng: np.random.Generator
                 ) -> tuple[str, float, tuple[float, float]]:
    """The estimator's alpha over the first new_tokens positions of its sequences (the part
    of a continuation the decodes generate), with its bootstrap interval over prompts;
    for a deterministic drafter over the positions with a proposal (what the decode's
    accepted / reached counts). Returns (name, value, interval)."""
    sums, counts = [], []
    for s in alpha.scores:
        beta, proposed = s.beta[:new_tokens], s.proposed[:new_tokens]
        keep = proposed if deterministic else np.ones_like(proposed)
        sums.append(float(beta[keep].sum()))
        counts.append(float(keep.sum()))
    sums_a, counts_a = np.array(sums), np.array(counts)
    name = f"{'alpha_when_proposed' if deterministic else 'alpha'} over the first {new_tokens} positions"
    if counts_a.sum() == 0:
        return name, float("nan"), (float("nan"), float("nan"))
    value = float(sums_a.sum() / counts_a.sum())
    nonzero = counts_a > 0
    return name, value, bootstrap_ratio_ci(sums_a[nonzero], counts_a[nonzero], rng)


def alpha_agreement_z(estimate: float, estimate_ci: Sequence[float], decode: float,
                      decode_ci: Sequence[float]) -> float:
    """Two-sample z statistic of decode minus estimate: the standard errors are read off the
    two independent 95% intervals (half-width / 1.96); |z| <= 1.96 means the two measurements
    agree at the 5% level."""
    se = np.sqrt(sum(((hi - lo) / (2 * 1.959964)) ** 2 for lo, hi in (estimate_ci, decode_ci)))
    difference = decode - estimate
    if se == 0:  # both exact (e.g. a drafter that always agrees)
        return 0.0 if difference == 0 else float(np.copysign(np.inf, difference))
    return float(difference / se)


def replay_in_runs(alpha: AlphaEstimate, gamma: int, new_tokens: int) -> tuple[DecodeStats, np.ndarray]:
    """The replay (exact at T = 0, expected counts at T > 0) over the first new_tokens positions
    of each of the estimator's sequences: the same budget and the same place after the prompt
    as the decodes (prompt lookup's acceptance grows with the text generated so far, so later
    windows would not represent the decodes)."""
    return replay([s.accept()[..., :new_tokens] for s in alpha.scores],
                  [s.block[..., :new_tokens] for s in alpha.scores],
                  gamma, alpha.max_gamma)


def predict_row(name: str, temperature: float, gamma: int, alpha: AlphaEstimate, cost: CostEstimate,
                runs: Sequence[Run], baseline: Sequence[Run], window: tuple[str, float, tuple[float, float]],
                rng: np.random.Generator | None = None) -> ValidationRow:
    """Measured speedup (`specdec.reference.measure.speedup`) and the three predictions for one
    configuration (see the module doc); runs and baseline pair by position. window: the
    estimator's alpha over the decoded stretch (`window_alpha`), computed once per drafter and
    temperature so every gamma row shows the same value and interval."""
    rng = rng if rng is not None else np.random.default_rng(0)
    stats = DecodeStats.total([r.stats for r in runs])
    measured = speedup(baseline, runs, rng)
    seconds = measured.seconds[1]
    new_tokens = measured.tokens[1] // len(runs)  # tokens per run
    accepted = np.array([sum(r.stats.accepted) for r in runs], dtype=np.float64)
    reached = np.array([sum(r.stats.reached) for r in runs], dtype=np.float64)
    decode_ci = (bootstrap_ratio_ci(accepted[reached > 0], reached[reached > 0], rng)
                 if (reached > 0).any() else (float("nan"), float("nan")))
    c_eff, v_eff = effective_cost(cost.c, cost.verify_cost, cost.overhead)
    # (i) the paper's model
    paper = float(walltime_improvement(alpha.alpha, gamma, cost.c))
    # (ii) measured per-position acceptance + v(k) + c + overheads, over the recorded k's
    survival = survival_acceptance(stats.accepted, stats.iterations)
    tokens = float(positional_expected_tokens(survival, gamma))
    k_hist = np.array(stats.proposed_hist, dtype=np.float64)  # iterations by proposal length k = 0..gamma
    extended = tokens / mean_iteration_time(k_hist, c_eff, v_eff)
    # (iii) acceptance from the estimator alone
    if alpha.scores and all(s.accept() is not None for s in alpha.scores):
        replayed, est_hist = replay_in_runs(alpha, gamma, new_tokens)
        extended_estimated = replayed.tokens_per_iteration() / mean_iteration_time(est_hist, c_eff, v_eff)
    else:  # a drafter whose deeper drafts teacher forcing does not see: i.i.d. alpha
        extended_estimated = budgeted_speedup(alpha.alpha, gamma, new_tokens, c_eff, v_eff)
    compared, compared_value, compared_ci = window
    decode_alpha = stats.alpha()
    step = cost.target.step_seconds
    base_steps = 1.0 + cost.overhead[0]  # predicted baseline time per token, in target steps
    iteration_predicted = mean_iteration_time(k_hist, c_eff, v_eff) * base_steps
    drafts = float((k_hist * np.arange(gamma + 1)).sum() / k_hist.sum())
    # c carries what a cycle costs the target's next pass (`DraftTiming.next_pass`): decoding books it as verify time
    cycle_c = cost.c if cost.draft is None or cost.draft.cycle_c is None else cost.draft.cycle_c
    return ValidationRow(
        drafter=name, temperature=temperature, gamma=gamma, alpha_estimate=alpha.alpha, alpha_ci=alpha.alpha_ci,
        alpha_compared=compared, alpha_compared_value=compared_value, alpha_compared_ci=tuple(compared_ci),
        alpha_decode=decode_alpha, alpha_decode_in_ci=bool(compared_ci[0] <= decode_alpha <= compared_ci[1]),
        alpha_decode_ci=decode_ci,
        alpha_intervals_overlap=bool(decode_ci[0] <= compared_ci[1] and compared_ci[0] <= decode_ci[1]),
        alpha_estimate_in_decode_ci=bool(decode_ci[0] <= compared_value <= decode_ci[1]),
        alpha_difference_z=alpha_agreement_z(compared_value, compared_ci, decode_alpha, decode_ci),
        alpha_per_position=stats.alpha_per_position(), alpha_survival=survival.tolist(),
        tokens_per_iteration=stats.tokens_per_iteration(), c=cost.c, v_gamma1=float(cost.verify_cost[gamma]),
        overhead_gamma=float(cost.overhead[gamma]), measured=measured.speedup, measured_ci=measured.ci,
        measured_corrected=measured.corrected, measured_runs=measured.per_run, paper=paper,
        extended=float(extended), extended_estimated=float(extended_estimated),
        iteration_seconds_measured=seconds / stats.iterations,
        iteration_seconds_predicted=iteration_predicted * step,
        verify_seconds_measured=stats.time_verify / stats.iterations,
        verify_seconds_predicted=step * (mean_iteration_time(k_hist, 0.0, v_eff) * base_steps
                                         + (cost.c - cycle_c) * drafts),
        draft_seconds_measured=stats.time_draft / stats.iterations,
        draft_seconds_predicted=step * cycle_c * drafts,
        baseline_token_seconds_measured=measured.seconds[0] / measured.tokens[0],
        baseline_token_seconds_predicted=step * base_steps,
        iteration_steps_measured=None if measured.steps is None else measured.steps[1] / stats.iterations,
        iteration_steps_predicted=iteration_predicted,
        baseline_token_steps_measured=None if measured.steps is None else measured.steps[0] / measured.tokens[0],
        cost_parts_steps=cost_parts(runs, cost, k_hist, drafts, cycle_c))


def cost_parts(runs: Sequence[Run], cost: CostEstimate, k_hist: np.ndarray, drafts: float, cycle_c: float
               ) -> dict[str, list[float]] | None:
    """Where an iteration's time goes, measured and predicted, in target steps of each run's moment
    (`ValidationRow.cost_parts_steps`): the pass v(k + 1) + the passes' tail + what the drafting cycle
    costs the next pass; after the pass o(k) without its tail; the draft k cycle_c (drafts: the mean k
    of k_hist). Their sum is iteration_steps_predicted where no v'(k) is floored (`effective_cost`)."""
    if cost.overhead_tail_seconds is None or not all(r.step_seconds for r in runs):
        return None
    iterations = sum(r.stats.iterations for r in runs)

    def steps(seconds) -> float:
        return float(sum(seconds(r.stats) / r.step_seconds for r in runs) / iterations)

    weights = k_hist / k_hist.sum()
    ks = np.arange(len(k_hist))
    tail = np.asarray(cost.overhead_tail_seconds)[ks] / cost.target.step_seconds
    draft_steps = cycle_c * drafts
    next_pass = cost.c * drafts - draft_steps  # what the cycles cost the next passes (`DraftTiming.next_pass`)
    predicted_pass = float((weights * (np.asarray(cost.verify_cost)[ks] + tail)).sum()) + next_pass
    predicted_after = float((weights * (np.asarray(cost.overhead)[ks] - tail)).sum())
    return {"pass": [steps(lambda s: s.time_pass), predicted_pass],
            "after_pass": [steps(lambda s: s.time_verify - s.time_pass), predicted_after],
            "draft": [steps(lambda s: s.time_draft), draft_steps]}


def plan_entry(name: str, temperature: float, alpha: AlphaEstimate, cost: CostEstimate, max_gamma: int
               ) -> PlanEntry:
    """The simulator's plan for one (drafter, temperature): the best gamma under the paper's
    model (alpha, c, v == 1) and under the extended cost model (alpha i.i.d., c', v'); for
    blockwise heads alpha_1..alpha_H replace the i.i.d. alpha and gamma stops at H."""
    a = min(alpha.alpha, 1.0 - 1e-9)  # the plan needs alpha < 1 (a drafter equal to the target)
    c_eff, v_eff = effective_cost(cost.c, cost.verify_cost, cost.overhead)
    if alpha.alpha_per_position is not None:  # blockwise heads: their own alpha_i, at most H drafts
        per_position = {"alpha_per_position": alpha.alpha_per_position}
        max_gamma = min(max_gamma, len(alpha.alpha_per_position))
    else:
        per_position = {"alpha": a}
    paper = make_plan(c=cost.c, max_gamma=max_gamma, **per_position)
    extended = make_plan(c=c_eff, max_gamma=max_gamma, verify_cost=v_eff[:max_gamma + 1], **per_position)
    return PlanEntry(name, temperature, alpha.alpha, cost.c, cost.c_hat, paper.optimal_gamma,
                     float(paper.walltime_improvement[paper.optimal_gamma]), extended.optimal_gamma,
                     float(extended.walltime_improvement[extended.optimal_gamma]))
