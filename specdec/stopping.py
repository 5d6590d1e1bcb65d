"""`specdec plan --stopping FILE` (issue 52): the confidence threshold (tau, n_min, n_max) a
stopping rule should run, from the joint law of (draft confidence, acceptance) and the costs an
estimate measured, with the engines' flags, the best fixed gamma beside it, the gain, and the
break-even ceiling (`specdec.simulator.dynamic`). Torch-free.

Three plans, because the engines' rules differ (read in their sources):
- llama.cpp (`common/speculative.cpp`): the draft stops before a token whose top probability
  is below --spec-draft-p-min (the token is dropped), at most --spec-draft-n-max tokens;
  --spec-draft-n-min discards a draft shorter than it (not priced here: planned with 0).
- transformers (assisted generation, `assistant_confidence_threshold`): the token that fell
  below the threshold is kept, then the draft stops (`keep_last`), at most
  `num_assistant_tokens` (schedule "constant"); no minimum. The "heuristic" schedule's
  predicted speedup (its Markov chain) is printed beside it.
- specdec's decoder (`--draft-policy confidence:...`): drop the token, the first n_min always drafted.

Inputs: an estimate JSON (`specdec estimate --json`; "confidence_law", "cost") or a
validation.json (`specdec validate`: its "alpha" and "cost" entries per drafter and temperature),
with one category of several chosen by `category`. c and v(k) have the decode loop's measured
overhead folded in (as the validation's predictions), unless the file has none."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specdec.engines.llamacpp.validation import DRAFT_TOP_K as LLAMA_TOP_K
from specdec.errors import SpecdecError
from specdec.simulator.dynamic import (ConfidenceLaw, confidence_law, heuristic_schedule, plan_stopping,
                                      threshold_prediction)
from specdec.simulator.prediction import effective_cost


@dataclass(frozen=True)
class StoppingInputs:
    law: ConfidenceLaw
    c: float  # c' (overhead folded in when known)
    verify_cost: tuple[float, ...]  # v'(1..K)
    source: str  # what was read, for the report
    top_k: int = 0  # the law's confidence: the top probability renormalised over the top k (0: all)


def _law(d: Any, where: str) -> ConfidenceLaw:
    if not isinstance(d, dict) or not all(k in d for k in ("edges", "positions", "accepted")):
        raise SpecdecError(f"{where} holds no confidence_law (the drafter reports no confidence, or the file predates "
                           "issue 52): write it with `specdec estimate --json` for a chain drafter")
    if np.asarray(d["positions"], dtype=np.float64).sum() <= 0:
        raise SpecdecError(f"{where}: the confidence law counts no positions")
    return confidence_law(d)  # per draft position where the file has it, else the pooled row


def _costs(cost: Any, where: str) -> tuple[float, tuple[float, ...]]:
    if not isinstance(cost, dict) or cost.get("c") is None or not cost.get("verify_cost"):
        raise SpecdecError(f"{where} holds no timed costs (c, verify_cost): estimate with timings")
    v = [float(x) for x in cost["verify_cost"]]
    overhead = cost.get("overhead")
    if overhead and len(overhead) >= len(v):
        c, v_eff = effective_cost(float(cost["c"]), v, overhead[:len(v)])
        return float(c), tuple(float(x) for x in v_eff)
    return float(cost["c"]), tuple(max(1.0, x) for x in v)


def read_stopping_inputs(path: Path, category: str | None = None, drafter: str | None = None,
                         temperature: float | None = None) -> StoppingInputs:
    """The law and costs of one (category, drafter, temperature) of an estimate or validation file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecdecError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise SpecdecError(f"{path}: expected a JSON object (an estimate or a validation)")
    where = str(path)
    if isinstance(data.get("categories"), dict):
        names = list(data["categories"])
        if category is None:
            if len(names) > 1:
                raise SpecdecError(f"{path} holds categories {', '.join(names)}: name one with --category")
            category = names[0]
        if category not in data["categories"]:
            raise SpecdecError(f"{path} has no category {category!r} (it has {', '.join(names)})")
        data, where = data["categories"][category], f"{path} [{category}]"
    elif category is not None and data.get("category") not in (None, category):
        raise SpecdecError(f"{path} is of category {data.get('category')!r}, not {category!r}")
    if isinstance(data.get("alpha"), list):  # a validation: entries per (drafter, temperature)
        def pick(entries: list) -> dict:
            hits = [e for e in entries if (drafter is None or e.get("drafter") == drafter)
                    and (temperature is None or e.get("temperature") == temperature)]
            keys = sorted({(e.get("drafter"), e.get("temperature")) for e in hits})
            if len(keys) != 1:
                have = sorted({(e.get("drafter"), e.get("temperature")) for e in entries})
                raise SpecdecError(f"{where}: name one drafter (--drafter) and temperature (--temperature) of "
                                   + ", ".join(f"{d} at T={t:g}" for d, t in have))
            return hits[0]
        alpha, cost = pick(data["alpha"]), pick(data.get("cost") or [])
        where = f"{where} {alpha['drafter']} at T={alpha['temperature']:g}"
        d = alpha.get("confidence_law")
    else:
        if drafter is not None or temperature is not None:
            raise SpecdecError(f"{path} is one estimate: --drafter and --temperature choose within a validation.json")
        d, cost = data.get("confidence_law"), data.get("cost")
    law = _law(d, where)
    c, v = _costs(cost, where)
    return StoppingInputs(law, c, v, where, int(d.get("top_k") or 0))


def stopping_plan(inputs: StoppingInputs, max_n: int) -> dict[str, Any]:
    """The three plans (see the module doc), the fixed gamma and the ceiling, as one JSON-ready dict."""
    v = np.asarray(inputs.verify_cost)
    top = min(max_n, v.size - 1)
    if top < 1:
        raise SpecdecError("the verify-cost curve must give v(1..K) with K >= 2 to plan any draft")
    drop = plan_stopping(inputs.law, inputs.c, v, max_n=top)  # the decoder: n_min in 0..3
    llama = plan_stopping(inputs.law, inputs.c, v, max_n=top, n_mins=(0,))
    hf = plan_stopping(inputs.law, inputs.c, v, max_n=top, n_mins=(0,), keep_last=True)
    schedule = heuristic_schedule(inputs.law, inputs.c, v, cap=top)

    def rule(p) -> dict[str, Any]:
        tokens = threshold_prediction(inputs.law, [p.tau], p.n_min, p.n_max, inputs.c, v, p.keep_last)
        return {"tau": p.tau, "n_min": p.n_min, "n_max": p.n_max, "keep_last": p.keep_last, "speedup": p.speedup,
                "expected_tokens": float(tokens.expected_tokens[0]), "expected_drafts": float(tokens.expected_drafts[0]),
                "gain_over_fixed_gamma": p.gain}

    return {
        "source": inputs.source, "c": inputs.c, "verify_cost": list(inputs.verify_cost), "max_n": top,
        "alpha": float(inputs.law.alphas(1)[0]),
        "fixed_gamma": {"gamma": drop.fixed_gamma, "speedup": drop.fixed_speedup},
        "ceiling": {"rule": "break-even (optimal stopping)", "speedup": drop.ceiling},
        "decoder": {**rule(drop), "flags": f"--draft-policy confidence:tau={drop.tau:g},n_min={drop.n_min},"
                                           f"n_max={drop.n_max}"},
        "llama.cpp": {**rule(llama), "flags": f"--spec-draft-p-min {llama.tau:g} --spec-draft-n-min 0 "
                                              f"--spec-draft-n-max {llama.n_max}",
                      **({} if inputs.top_k == LLAMA_TOP_K else {
                          "note": f"the law's confidence is the top probability over "
                                  f"{'all tokens' if not inputs.top_k else f'the top {inputs.top_k}'}; llama.cpp's "
                                  f"p-min reads it renormalised over the draft's top {LLAMA_TOP_K}: estimate with "
                                  f"--confidence-top-k {LLAMA_TOP_K} for its tau"})},
        "transformers": {**rule(hf), "flags": f"assistant_confidence_threshold={hf.tau:g}, num_assistant_tokens="
                                              f"{hf.n_max}, num_assistant_tokens_schedule=\"constant\""},
        "transformers_heuristic": {"speedup": schedule.speedup, "cap": top,
                                   "flags": f"num_assistant_tokens_schedule=\"heuristic\", assistant_confidence_"
                                            f"threshold=0 (num_assistant_tokens at most {top} here)"},
    }


def stopping_text(d: dict[str, Any]) -> str:
    fixed = d["fixed_gamma"]
    lines = [f"confidence law and costs: {d['source']}",
             f"  alpha {d['alpha']:.3f}, c {d['c']:.4g}, v(1..{len(d['verify_cost'])}) = "
             + ",".join(f"{x:.3g}" for x in d["verify_cost"]) + f"; drafts up to {d['max_n']}",
             f"best fixed gamma: {fixed['gamma']} -> {fixed['speedup']:.3f}X",
             f"ceiling (break-even stopping rule): {d['ceiling']['speedup']:.3f}X", ""]
    for name in ("decoder", "llama.cpp", "transformers"):
        r = d[name]
        what = "keep the token below tau" if r["keep_last"] else "drop the token below tau"
        lines += [f"{name}: tau {r['tau']:g}, n_min {r['n_min']}, n_max {r['n_max']} ({what}) -> {r['speedup']:.3f}X "
                  f"({100 * r['gain_over_fixed_gamma']:+.1f}% over fixed gamma {fixed['gamma']}; "
                  f"{r['expected_tokens']:.2f} tokens, {r['expected_drafts']:.2f} drafts per iteration)",
                  f"  {r['flags']}"] + ([f"  note: {r['note']}"] if r.get("note") else [])
    h = d["transformers_heuristic"]
    lines += [f"transformers heuristic schedule (+2 / -1): {h['speedup']:.3f}X", f"  {h['flags']}"]
    return "\n".join(lines)
