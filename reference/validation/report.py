"""Markdown tables of a validation run, rendered from the typed `ValidationResult`.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target step-time ratio, `c_hat` the arithmetic ratio, v(k) the
verify-cost curve. Every function returns a string; no I/O. Columns: `rows.py` and NOTES.
"""
from __future__ import annotations

import math
from pathlib import Path

from specdec.reference.validation.config import COST_TOLERANCE, STEADY_TOLERANCE, TOLERANCE
from specdec.reference.validation.rows import COST_PARTS, ValidationResult, ValidationRow, configuration_key


def _t(temperature: float) -> str:
    return f"t={temperature:g}"


def _num(x: float | None, spec: str) -> str:
    """A number in a table; undefined values (None, NaN: e.g. a drafter that never proposed) read n/a."""
    return "n/a" if x is None or x != x else format(x, spec)


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:+.1f}%"


def _ci(ci: tuple[float, float] | list[float] | None, spec: str = ".2f") -> str:
    return "[n/a]" if ci is None else f"[{_num(ci[0], spec)}, {_num(ci[1], spec)}]"


def sizes_line(result: ValidationResult) -> str:
    cfg = result.config
    return (f"sizes: alpha from {cfg.alpha_prompts} held-out prompts x {cfg.alpha_new_tokens} target-sampled "
            f"tokens = {cfg.alpha_prompts * cfg.alpha_new_tokens} positions per temperature; decode: {cfg.prompts} "
            f"prompts x {cfg.new_tokens} new tokens x {cfg.repeats} repeat(s) per configuration (prompt "
            f"{cfg.prompt_tokens} tokens); gammas {','.join(map(str, cfg.gammas))}; temperatures "
            f"{','.join(f'{t:g}' for t in cfg.temperatures)}; timings at {result.timing.context_tokens} tokens of "
            f"context; target backend {result.machine.get('backend', 'eager')}")


def alpha_table(result: ValidationResult) -> str:
    """Table 3 of the paper: one row per (drafter, sampling), alpha with its 95% interval."""
    target = Path(result.target).name
    lines = ["| M_p | M_q | SMPL | alpha | 95% CI | alpha when proposed / per draft position (heads) | positions |",
             "|---|---|---|---|---|---|---|"]
    for (drafter, t), a in result.alphas.items():
        when = ("" if a.proposal_rate >= 1
                else f"{_num(a.alpha_when_proposed, '.3f')} ({100 * a.proposal_rate:.0f}% proposed)")
        if a.alpha_per_position is not None:
            when = "alpha_1..alpha_H " + ", ".join(_num(x, ".3f") for x in a.alpha_per_position)
        lines.append(f"| {target} | {drafter} | {_t(t)} | {_num(a.alpha, '.3f')} | {_ci(a.alpha_ci, '.3f')} | "
                     f"{when} | {a.n_positions} |")
    return "\n".join(lines)


def alpha_pivot(result: ValidationResult) -> str:
    """alpha per drafter (rows) and temperature (columns)."""
    temps = list(dict.fromkeys(t for _, t in result.alphas))
    names = list(dict.fromkeys(d for d, _ in result.alphas))
    lines = ["| M_q | " + " | ".join(f"alpha ({_t(t)})" for t in temps) + " |", "|---|" + "---|" * len(temps)]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(_num(result.alphas[(n, t)].alpha, ".3f") for t in temps) + " |")
    return "\n".join(lines)


def lenience_table(result: ValidationResult) -> str:
    """alpha under lenience l (App. A.5, Table 5): sum min(p/l, q); argmax variant at t=0."""
    first = next(iter(result.alphas.values()))
    lines = ["| M_q | SMPL | " + " | ".join(f"l={l:g}" for l in first.lenience) + " |",
             "|---|---|" + "---|" * len(first.lenience)]
    for (drafter, t), a in result.alphas.items():
        cells = [_num(x, ".3f") for x in a.alpha_lenience]
        if a.alpha_lenient_argmax:
            cells = [f"{_num(x, '.3f')} (argmax rule {_num(y, '.3f')})"
                     for x, y in zip(a.alpha_lenience, a.alpha_lenient_argmax)]
        lines.append(f"| {drafter} | {_t(t)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_table(result: ValidationResult) -> str:
    """c (timed), c_hat (counted), the draft step and the target step."""
    lines = [f"target step t(1) = {1000 * result.timing.step_seconds:.1f} ms at {result.timing.context_tokens} "
             "tokens of context", "", "| M_q | SMPL | draft ms/token | c | c_hat | loop overhead o(0) | o(4) |",
             "|---|---|---|---|---|---|---|"]
    for (drafter, t), c in result.costs.items():
        o = c.overhead
        draft = None if c.draft is None else 1000 * c.draft.token_seconds
        lines.append(f"| {drafter} | {_t(t)} | {_num(draft, '.3f')} | {_num(c.c, '.4f')} | {_num(c.c_hat, '.2g')} | "
                     f"{_num(o[0], '.4f')} | {_num(o[min(4, len(o) - 1)], '.4f')} |")
    return "\n".join(lines)


def verify_cost_line(result: ValidationResult) -> str:
    v = result.timing.verify_cost
    return f"v(k), k = 1..{len(v)}: " + " ".join(_num(x, ".2f") for x in v)


def plan_table(result: ValidationResult) -> str:
    """The simulator's plan from the estimates: best gamma and its predicted speedup."""
    lines = ["| M_q | SMPL | alpha | c | paper: best gamma | paper: speedup | extended: best gamma | "
             "extended: speedup |", "|---|---|---|---|---|---|---|---|"]
    for p in result.plans:
        lines.append(f"| {p.drafter} | {_t(p.temperature)} | {_num(p.alpha, '.3f')} | {_num(p.c, '.4f')} | "
                     f"{p.paper_gamma} | {_num(p.paper_speedup, '.2f')}x | {p.extended_gamma} | "
                     f"{_num(p.extended_speedup, '.2f')}x |")
    return "\n".join(lines)


def _errors(r: ValidationRow, predicted: float, wall: float) -> str:
    corrected = r.corrected_error(predicted)
    return _pct(wall) if corrected is None else f"{_pct(wall)} / {_pct(corrected)}"


def validation_table(result: ValidationResult) -> str:
    """Predicted vs measured speedup for every configuration, with relative errors."""
    lines = ["| M_q | SMPL | gamma | alpha est. (all / first n [CI]) | alpha decode [its CI] (in est. CI?; "
             "two-sample z) | tokens/iter | measured, wall [95% CI] | measured, drift-corrected | (i) paper | "
             "(ii) extended | (iii) ext. estimated | (ii) within 10% (wall / corrected) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result.rows:
        inside = ("yes" if r.alpha_decode_in_ci else "no, overlap" if r.alpha_intervals_overlap else "no, apart") \
            + f"; z {_num(r.alpha_difference_z, '+.1f')}"
        within = "yes" if r.extended_within_tolerance else "NO"
        if r.extended_within_tolerance_corrected is not None:
            within += " / " + ("yes" if r.extended_within_tolerance_corrected else "NO")
        corrected = "" if r.measured_corrected is None else _num(r.measured_corrected, ".3f") + "x"
        lines.append(
            f"| {r.drafter} | {_t(r.temperature)} | {r.gamma} | {_num(r.alpha_estimate, '.3f')} / "
            f"{_num(r.alpha_compared_value, '.3f')} {_ci(r.alpha_compared_ci)} | "
            f"{_num(r.alpha_decode, '.3f')} {_ci(r.alpha_decode_ci)} ({inside}) | "
            f"{_num(r.tokens_per_iteration, '.2f')} | {_num(r.measured, '.3f')}x {_ci(r.measured_ci)} | {corrected} | "
            f"{_num(r.paper, '.3f')}x ({_errors(r, r.paper, r.error_paper)}) | "
            f"{_num(r.extended, '.3f')}x ({_errors(r, r.extended, r.error_extended)}) | "
            f"{_num(r.extended_estimated, '.3f')}x ({_errors(r, r.extended_estimated, r.error_extended_estimated)})"
            f" | {within} |")
    return "\n".join(lines)


def timing_check_table(result: ValidationResult) -> str:
    """Where the cost model stands: predicted vs measured milliseconds per iteration (split into
    the target side and the draft side) and per baseline token, then the iteration in target
    steps of each run's moment (its seconds / the t(1) probed around it). Absolute times drift
    with the machine; the speedup predictions only use ratios (v(k), c, o(k) relative to t(1)),
    and the steps column is the check of those ratios with the drift removed."""
    lines = ["| M_q | SMPL | gamma | iteration ms: measured / predicted | target side | draft side | "
             "baseline ms/token | iteration, target steps of its moment | error: ms / steps | "
             "the steps' error by part: pass / after it / draft |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def ms(measured: float, predicted: float, spec: str = ".1f") -> str:
        return f"{_num(1000 * measured, spec)} / {_num(1000 * predicted, spec)}"

    for r in result.rows:
        steps = ("-" if r.iteration_steps_measured is None else
                 f"{_num(r.iteration_steps_measured, '.3f')} / {_num(r.iteration_steps_predicted, '.3f')}")
        lines.append(f"| {r.drafter} | {_t(r.temperature)} | {r.gamma} | "
                     f"{ms(r.iteration_seconds_measured, r.iteration_seconds_predicted)} | "
                     f"{ms(r.verify_seconds_measured, r.verify_seconds_predicted)} | "
                     f"{ms(r.draft_seconds_measured, r.draft_seconds_predicted, '.2f')} | "
                     f"{ms(r.baseline_token_seconds_measured, r.baseline_token_seconds_predicted)} | {steps} | "
                     f"{_pct(r.cost_error)} / {'-' if r.cost_error_steps is None else _pct(r.cost_error_steps)} | "
                     f"{' / '.join(map(_pct, part_errors(r.cost_parts_steps, r.iteration_steps_predicted))) or '-'} |")
    return "\n".join(lines) + "\n\n" + cost_check_line(result)


def part_errors(parts: dict[str, list[float]] | None, iteration_steps_predicted: float | None) -> list[float]:
    """What each part of the iteration (`ValidationRow.cost_parts_steps`: pass, after the pass, draft)
    adds to the error in steps, as a share of the predicted iteration (they sum to about the error);
    empty where the parts were not measured."""
    if not parts or not iteration_steps_predicted:
        return []
    return [(m - p) / iteration_steps_predicted for m, p in (parts[n] for n in COST_PARTS)]


def cost_check_line(result: ValidationResult) -> str:
    """How many iterations the cost model prices within COST_TOLERANCE, in seconds and in target
    steps of each run's moment, and, when some configurations ran on two machines (`held_steady`),
    the same over those that ran on one."""
    rows, goal = result.rows, f"{100 * COST_TOLERANCE:.0f}%"
    if not rows:
        return "cost model: no configuration decoded"

    def count(errors: list[tuple[float, ValidationRow]], unit: str) -> str:
        error, worst = max(errors, key=lambda e: abs(e[0]))
        held = sum(abs(e) <= COST_TOLERANCE for e, _ in errors)
        return (f"{held}/{len(errors)} configurations {unit} (largest {_pct(error)}: {worst.drafter} "
                f"{_t(worst.temperature)} gamma {worst.gamma})")

    text = f"cost model: iteration time within {goal} of its prediction in " + count(
        [(r.cost_error, r) for r in rows], "in seconds")
    probed = [(r.cost_error_steps, r) for r in rows if r.cost_error_steps is not None]
    if not probed:
        return text
    text += "; " + count(probed, "in target steps of each run's moment")
    steady = [(e, r) for e, r in probed if held_steady(result, r)]
    if len(steady) == len(probed):
        return text
    return text + (f"; of the {len(steady)} whose probed step held within {100 * STEADY_TOLERANCE:.0f}% over their "
                   "runs and of the t(1) they are priced at (one machine): "
                   + (count(steady, "in steps") if steady else "none"))


def held_steady(result: ValidationResult, row: ValidationRow) -> bool:
    """Whether the one-token step probed around a configuration's runs and the t(1) its prediction
    is priced at stay within STEADY_TOLERANCE of each other: the decodes and the costs they are
    checked against ran on one machine (`probe_clause`)."""
    probe = result.interference.get(configuration_key(row.temperature, row.drafter, row.gamma), {})
    return bool(one_machine(probe.get("probe_seconds"), row.priced_step_seconds))


def one_machine(probe: list[float] | None, priced: float | None) -> bool | None:
    """probe: [least, median, most] one-token step probed around the runs; priced: the t(1) the
    prediction uses. True when all lie within STEADY_TOLERANCE of each other (most / least - 1),
    False when not, None when either is unknown (a run saved before the probes were kept)."""
    if probe is None or priced is None or not math.isfinite(priced):
        return None
    return max(probe[2], priced) / min(probe[0], priced) - 1 <= STEADY_TOLERANCE


def summary_line(result: ValidationResult) -> str:
    rows = result.rows
    n = len(rows)
    worst = max(rows, key=lambda r: abs(r.error_extended))
    text = (f"extended model (ii) within {100 * TOLERANCE:.0f}% of the wall-clock speedup: "
            f"{sum(r.extended_within_tolerance for r in rows)}/{n} configurations (largest error "
            f"{_pct(worst.error_extended)}: {worst.drafter} {_t(worst.temperature)} gamma {worst.gamma}); "
            f"inside the wall-clock speedup's 95% CI: {sum(r.measured_ci_covers_extended for r in rows)}/{n}")
    if all(r.measured_corrected is not None for r in rows):
        worst = max(rows, key=lambda r: abs(r.corrected_error(r.extended)))
        text += (f"; within {100 * TOLERANCE:.0f}% of the drift-corrected speedup: "
                 f"{sum(bool(r.extended_within_tolerance_corrected) for r in rows)}/{n} (largest error "
                 f"{_pct(worst.corrected_error(worst.extended))}: {worst.drafter} {_t(worst.temperature)} "
                 f"gamma {worst.gamma})")
    return text + (f". Decode alpha inside the estimator's 95% CI: {sum(r.alpha_decode_in_ci for r in rows)}/{n}; "
                   f"estimator's alpha inside the decode's 95% CI: {sum(r.alpha_estimate_in_decode_ci for r in rows)}"
                   f"/{n}; intervals overlapping: {sum(r.alpha_intervals_overlap for r in rows)}/{n}; two-sample "
                   f"|z| <= 1.96 (agreement at the 5% level): {sum(abs(r.alpha_difference_z) <= 1.96 for r in rows)}"
                   f"/{n}")


def interference_line(result: ValidationResult) -> str:
    if not result.interference:
        return ""
    i = result.interference_summary()
    return (f"machine noise: {i['decode_attempts'] - i['decode_runs']} of {i['decode_runs']} decode runs were redone "
            f"because other processes used > {i['threshold_cores']:g} CPU cores meanwhile; "
            f"{i['still_disturbed']} kept runs still disturbed (max foreign load {i['max_load']:.2f} cores)"
            + probe_clause(i["probe_seconds"]))


def probe_clause(probe: list[float] | None) -> str:
    """What the one-token probes around the decode runs say of the machine's own speed: a host can
    move a memory-bound target's step by a third with no foreign load in the VM; on a short step
    the probe's own jitter adds to the spread (docs/validation.md)."""
    if not probe:
        return ""
    low, median, high = (1e3 * p for p in probe)
    moved = high / low - 1
    text = (f"; the one-token target step probed around the runs: {low:.1f}-{high:.1f} ms (the configurations' "
            f"median {median:.1f})")
    if moved <= STEADY_TOLERANCE:
        return text
    return (text + f": {100 * moved:.0f}% apart, more than {100 * STEADY_TOLERANCE:.0f}%, so runs of different "
            "speeds may meet in the cost check (docs/validation.md, \"When the host moves the machine's speed\")")


def full_report(result: ValidationResult) -> str:
    """Every table, in the order the main job prints them."""
    notes = "\n".join(f"- {k}: {v}" for k, v in result.notes.items())
    return "\n\n".join([
        sizes_line(result),
        "## Plan (simulator, from the estimated alpha and costs)\n\n" + plan_table(result),
        "## Measured alpha (teacher-forced, Corollary 3.6; Table 3 layout)\n\n" + alpha_table(result)
        + "\n\n" + alpha_pivot(result),
        "## alpha under lenience (App. A.5)\n\n" + lenience_table(result),
        "## Costs\n\n" + cost_table(result) + "\n\n" + verify_cost_line(result),
        "## Predicted vs measured speedup\n\n" + validation_table(result) + "\n\n" + summary_line(result)
        + "\n\n" + interference_line(result),
        "## Cost model check\n\n" + timing_check_table(result),
        *([policy_section(result)] if result.policy_rows else []),
        "## What each column is\n\n" + notes,
    ])


def policy_section(result: ValidationResult) -> str:
    from specdec.reference.validation.dynamic import policy_report, threshold_decisions

    return "## " + policy_report(result.policy_rows, threshold_decisions(result.policy_rows, result.rows))[4:]
