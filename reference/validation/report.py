"""Markdown tables of a validation run (from `ValidationResult.to_dict()`), for stdout and files.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, `gamma` draft tokens per
iteration, `c` draft/target step-time ratio, `c_hat` the arithmetic ratio, v(k) the
verify-cost curve. Every function takes the plain dict and returns a string; no I/O.
"""
from __future__ import annotations

from typing import Any


def _t(temperature: float) -> str:
    return f"t={temperature:g}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:+.1f}%"


def _num(x: float | None, spec: str) -> str:
    """A number in a table; undefined values (None, NaN: e.g. a drafter that never proposed) read n/a."""
    return "n/a" if x is None or x != x else format(x, spec)


def sizes_line(d: dict[str, Any]) -> str:
    cfg = d["config"]
    alpha_tokens = cfg["alpha_prompts"] * cfg["alpha_new_tokens"]
    return (f"sizes: alpha from {cfg['alpha_prompts']} held-out prompts x {cfg['alpha_new_tokens']} target-sampled "
            f"tokens = {alpha_tokens} positions per temperature; decode: {cfg['prompts']} prompts x "
            f"{cfg['new_tokens']} new tokens x {cfg['repeats']} repeat(s) per configuration (prompt "
            f"{cfg['prompt_tokens']} tokens); gammas {','.join(map(str, cfg['gammas']))}; temperatures "
            f"{','.join(f'{t:g}' for t in cfg['temperatures'])}; timings at {d['context_tokens']} tokens of context")


def alpha_table(d: dict[str, Any], target: str = "target") -> str:
    """Table 3 of the paper: one row per (drafter, sampling), alpha with its 95% interval."""
    lines = ["| M_p | M_q | SMPL | alpha | 95% CI | alpha when proposed | positions |",
             "|---|---|---|---|---|---|---|"]
    for a in d["alpha"]:
        when = ("" if a["proposal_rate"] >= 1
                else f"{_num(a['alpha_when_proposed'], '.3f')} ({_num(100 * a['proposal_rate'], '.0f')}% proposed)")
        lines.append(f"| {target} | {a['drafter']} | {_t(a['temperature'])} | {_num(a['alpha'], '.3f')} | "
                     f"[{_num(a['alpha_ci'][0], '.3f')}, {_num(a['alpha_ci'][1], '.3f')}] | {when} | {a['n_positions']} |")
    return "\n".join(lines)


def alpha_pivot(d: dict[str, Any]) -> str:
    """alpha per drafter (rows) and temperature (columns)."""
    temps = list(dict.fromkeys(a["temperature"] for a in d["alpha"]))
    names = list(dict.fromkeys(a["drafter"] for a in d["alpha"]))
    value = {(a["drafter"], a["temperature"]): a["alpha"] for a in d["alpha"]}
    lines = ["| M_q | " + " | ".join(f"alpha ({_t(t)})" for t in temps) + " |",
             "|---|" + "---|" * len(temps)]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{_num(value[(n, t)], '.3f')}" for t in temps) + " |")
    return "\n".join(lines)


def lenience_table(d: dict[str, Any]) -> str:
    """alpha under lenience l (App. A.5, Table 5): sum min(p/l, q); argmax variant at t=0."""
    first = d["alpha"][0]
    ls = list(first["alpha_lenience"].keys())
    lines = ["| M_q | SMPL | " + " | ".join(f"l={l}" for l in ls) + " |", "|---|---|" + "---|" * len(ls)]
    for a in d["alpha"]:
        cells = [f"{_num(a['alpha_lenience'][l], '.3f')}" for l in ls]
        if a.get("alpha_lenient_argmax"):
            cells = [f"{_num(a['alpha_lenience'][l], '.3f')} (argmax rule {_num(a['alpha_lenient_argmax'][l], '.3f')})" for l in ls]
        lines.append(f"| {a['drafter']} | {_t(a['temperature'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cost_table(d: dict[str, Any]) -> str:
    """c (timed), c_hat (counted), the draft step and the target step."""
    lines = [f"target step t(1) = {_num(1000 * d['target_step_seconds'], '.1f')} ms at {d['context_tokens']} tokens of context",
             "", "| M_q | SMPL | draft ms/token | c | c_hat | loop overhead o(0) | o(4) |",
             "|---|---|---|---|---|---|---|"]
    for c in d["cost"]:
        o = c["overhead"]
        lines.append(f"| {c['drafter']} | {_t(c['temperature'])} | {_num(1000 * c['draft_token_seconds'], '.3f')} | "
                     f"{_num(c['c'], '.4f')} | {_num(c['c_hat'], '.2g')} | {_num(o[0], '.4f')} | {_num(o[min(4, len(o) - 1)], '.4f')} |")
    return "\n".join(lines)


def verify_cost_line(d: dict[str, Any]) -> str:
    v = d["verify_cost"]
    return "v(k), k = 1.." + str(len(v)) + ": " + " ".join(f"{_num(x, '.2f')}" for x in v)


def plan_table(d: dict[str, Any]) -> str:
    """The simulator's plan from the estimates: best gamma and its predicted speedup."""
    lines = ["| M_q | SMPL | alpha | c | paper: best gamma | paper: speedup | extended: best gamma | "
             "extended: speedup |", "|---|---|---|---|---|---|---|---|"]
    for p in d["plan"]:
        lines.append(f"| {p['drafter']} | {_t(p['temperature'])} | {_num(p['alpha'], '.3f')} | {_num(p['c'], '.4f')} | "
                     f"{p['paper']['optimal_gamma']} | {_num(p['paper']['speedup'], '.2f')}x | "
                     f"{p['extended']['optimal_gamma']} | {_num(p['extended']['speedup'], '.2f')}x |")
    return "\n".join(lines)


def validation_table(d: dict[str, Any]) -> str:
    """Predicted vs measured speedup for every configuration, with relative errors."""
    lines = ["| M_q | SMPL | gamma | alpha est. (all / first n [CI]) | alpha decode [its CI] (in est. CI?; two-sample z) | "
             "tokens/iter | "
             "measured, wall [95% CI] | measured, drift-corrected | (i) paper | (ii) extended | "
             "(iii) ext. estimated | (ii) within 10% (wall / corrected) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        inside = ("yes" if r["alpha_decode_in_ci"] else "no, overlap" if r["alpha_intervals_overlap"] else "no, apart") \
            + f"; z {_num(r['alpha_difference_z'], '+.1f')}"
        corrected = r.get("measured_corrected")

        def err(key: str) -> str:
            wall = _pct(r[f"error_{key}"])
            c = r.get(f"error_{key}_corrected")
            return wall if c is None else f"{wall} / {_pct(c)}"

        within = "yes" if r["extended_within_tolerance"] else "NO"
        if r.get("extended_within_tolerance_corrected") is not None:
            within += " / " + ("yes" if r["extended_within_tolerance_corrected"] else "NO")
        lines.append(
            f"| {r['drafter']} | {_t(r['temperature'])} | {r['gamma']} | {_num(r['alpha_estimate'], '.3f')} / "
            f"{_num(r['alpha_compared_value'], '.3f')} [{_num(r['alpha_compared_ci'][0], '.2f')}, {_num(r['alpha_compared_ci'][1], '.2f')}] | "
            f"{_num(r['alpha_decode'], '.3f')} [{_num(r['alpha_decode_ci'][0], '.2f')}, {_num(r['alpha_decode_ci'][1], '.2f')}] ({inside}) | "
            f"{_num(r['tokens_per_iteration'], '.2f')} | {_num(r['measured'], '.3f')}x [{_num(r['measured_ci'][0], '.2f')}, "
            f"{_num(r['measured_ci'][1], '.2f')}] | {'' if corrected is None else _num(corrected, '.3f') + 'x'} | "
            f"{_num(r['paper'], '.3f')}x ({err('paper')}) | {_num(r['extended'], '.3f')}x ({err('extended')}) | "
            f"{_num(r['extended_estimated'], '.3f')}x ({err('extended_estimated')}) | {within} |")
    return "\n".join(lines)


def timing_check_table(d: dict[str, Any]) -> str:
    """Where the cost model stands: predicted vs measured milliseconds per iteration (split into
    the target side and the draft side) and per baseline token. Absolute times drift with the
    machine; the speedup predictions only use ratios (v(k), c, o(k) relative to t(1))."""
    lines = ["| M_q | SMPL | gamma | iteration ms: measured / predicted | target side | draft side | "
             "baseline ms/token |", "|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        ms = lambda a, b: f"{_num(1000 * r[a], '.1f')} / {_num(1000 * r[b], '.1f')}"  # noqa: E731
        lines.append(f"| {r['drafter']} | {_t(r['temperature'])} | {r['gamma']} | "
                     f"{ms('iteration_seconds_measured', 'iteration_seconds_predicted')} | "
                     f"{ms('verify_seconds_measured', 'verify_seconds_predicted')} | "
                     f"{_num(1000 * r['draft_seconds_measured'], '.2f')} / {_num(1000 * r['draft_seconds_predicted'], '.2f')} | "
                     f"{ms('baseline_token_seconds_measured', 'baseline_token_seconds_predicted')} |")
    return "\n".join(lines)


def summary_line(d: dict[str, Any]) -> str:
    rows = d["rows"]
    inside = sum(r["alpha_decode_in_ci"] for r in rows)
    overlap = sum(r["alpha_intervals_overlap"] for r in rows)
    reverse = sum(r["alpha_estimate_in_decode_ci"] for r in rows)
    agree = sum(abs(r["alpha_difference_z"]) <= 1.96 for r in rows)
    covered = sum(r["measured_ci_covers_extended"] for r in rows)
    worst = max(rows, key=lambda r: abs(r["error_extended"]))
    text = (f"extended model (ii) within {_num(100 * d['tolerance'], '.0f')}% of the wall-clock speedup: "
            f"{d['extended_within_tolerance']}/{d['configurations']} configurations (largest error "
            f"{_pct(worst['error_extended'])}: {worst['drafter']} {_t(worst['temperature'])} gamma {worst['gamma']}); "
            f"inside the wall-clock speedup's 95% CI: {covered}/{len(rows)}")
    if all(r.get("error_extended_corrected") is not None for r in rows):
        within = sum(r["extended_within_tolerance_corrected"] for r in rows)
        worst = max(rows, key=lambda r: abs(r["error_extended_corrected"]))
        text += (f"; within {_num(100 * d['tolerance'], '.0f')}% of the drift-corrected speedup: {within}/{len(rows)} "
                 f"(largest error {_pct(worst['error_extended_corrected'])}: {worst['drafter']} "
                 f"{_t(worst['temperature'])} gamma {worst['gamma']})")
    return text + (f". Decode alpha inside the estimator's 95% CI: {inside}/{len(rows)}; estimator's alpha inside "
                   f"the decode's 95% CI: {reverse}/{len(rows)}; intervals overlapping: {overlap}/{len(rows)}; "
                   f"two-sample |z| <= 1.96 (agreement at the 5% level): {agree}/{len(rows)}")


def interference_line(d: dict[str, Any]) -> str:
    i = d.get("interference")
    if not i:
        return ""
    return (f"machine noise: {i['decode_attempts'] - i['decode_runs']} of {i['decode_runs']} decode runs were redone "
            f"because other processes used > {i['threshold_cores']:g} CPU cores meanwhile; "
            f"{i['still_disturbed']} kept runs still disturbed (max foreign load {_num(i['max_load'], '.2f')} cores)")


def full_report(d: dict[str, Any], target: str = "target") -> str:
    """Every table, in the order the main job prints them."""
    notes = "\n".join(f"- {k}: {v}" for k, v in d["notes"].items())
    return "\n\n".join([
        sizes_line(d),
        "## Plan (simulator, from the estimated alpha and costs)\n\n" + plan_table(d),
        "## Measured alpha (teacher-forced, Corollary 3.6; Table 3 layout)\n\n" + alpha_table(d, target)
        + "\n\n" + alpha_pivot(d),
        "## alpha under lenience (App. A.5)\n\n" + lenience_table(d),
        "## Costs\n\n" + cost_table(d) + "\n\n" + verify_cost_line(d),
        "## Predicted vs measured speedup\n\n" + validation_table(d) + "\n\n" + summary_line(d)
        + "\n\n" + interference_line(d),
        "## Cost model check\n\n" + timing_check_table(d),
        "## What each column is\n\n" + notes,
    ])
