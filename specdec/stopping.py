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
overhead folded in (as the validation's predictions), unless the file has none. With a llama.cpp
cost file (`EngineCurve`), llama.cpp's plan is priced at the engine's own costs instead, the
draft's passes inside its loop included: what `llamacpp validate`'s prediction (b) prices, at one
context and without the cost per accepted token (`accept_seconds`, ~0 on this CPU)."""
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
    c: float | None  # c' (overhead folded in when known); None: the file timed no costs
    verify_cost: tuple[float, ...] | None  # v'(1..K)
    source: str  # what was read, for the report
    top_k: int = 0  # the law's confidence: the top probability renormalised over the top k (0: all)
    context: float | None = None  # the estimate's mean context in tokens (prompt + half the new tokens)


def _law(d: Any, where: str) -> ConfidenceLaw:
    if not isinstance(d, dict) or not all(k in d for k in ("edges", "positions", "accepted")):
        raise SpecdecError(f"{where} holds no confidence_law (the drafter reports no confidence, or the file predates "
                           "issue 52): write it with `specdec estimate --json` for a chain drafter")
    if np.asarray(d["positions"], dtype=np.float64).sum() <= 0:
        raise SpecdecError(f"{where}: the confidence law counts no positions")
    return confidence_law(d)  # per draft position where the file has it, else the pooled row


def _costs(cost: Any) -> tuple[float | None, tuple[float, ...] | None]:
    """(c, v) of an estimate's costs; (None, None) where it timed none (`--no-timing`)."""
    if not isinstance(cost, dict) or cost.get("c") is None or not cost.get("verify_cost"):
        return None, None
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
    c, v = _costs(cost)
    return StoppingInputs(law, c, v, where, int(d.get("top_k") or 0), data.get("context"))


@dataclass(frozen=True)
class EngineCurve:
    """llama.cpp's own costs in the plan's units: c = s / t(1) and v(k) = (t(k) + P0 + P1 (k - 1)) / t(1)
    at one context, from a cost file of `specdec llamacpp costs --draft GGUF` (t(k) the target's step
    verifying k tokens; P0, P1, s the draft's pass over each verified batch, each token more in it, and
    a look, timed inside the engine's loop: `engines/llamacpp/draft_loop.py`)."""

    c: float
    verify_cost: tuple[float, ...]
    source: str


def engine_curve(path: Path, context: float | None) -> EngineCurve:
    """The EngineCurve of a llama.cpp cost file at `context` (the draft it times: exactly one)."""
    from specdec.engines.llamacpp.validation import EngineCosts

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        costs = EngineCosts.from_file(data)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise SpecdecError(f"{path} is not a llama.cpp cost file ({str(exc)[:120]})") from None
    if data.get("source") != "llama-server":
        raise SpecdecError(f"{path} is not a llama.cpp cost file (`specdec llamacpp costs --draft GGUF`)")
    if len(costs.drafts) != 1:
        raise SpecdecError(f"{path} times {len(costs.drafts)} draft models: write one with `specdec llamacpp costs "
                           "--draft GGUF` for this plan")
    if context is None:
        raise SpecdecError("the estimate states no context: give --context")
    gguf = Path(costs.drafts[0][0])
    p0, p1, s = costs.draft_parts(gguf, context)
    t1 = costs.t(1, context)
    if not t1 > 0:
        raise SpecdecError(f"{path}: t(1) is {t1} s at {context:.0f} tokens; a cost file times a positive step")
    v = tuple((costs.t(k, context) + p0 + p1 * (k - 1)) / t1 for k in range(1, len(costs.seconds[0]) + 1))
    loop = "inside the loop" if costs.loops else "at its own step (a file before 2026-11-28: every pass at t_d(1))"
    return EngineCurve(s / t1, v, f"{path} at {context:.0f} tokens: draft {gguf.name} {loop}, "
                                  f"P0 {1e3 * p0:.2f} P1 {1e3 * p1:.2f} s {1e3 * s:.2f} ms, t(1) {1e3 * t1:.2f} ms")


def require_costs(inputs: StoppingInputs, engine: EngineCurve | None) -> None:
    """A plan needs costs: the estimate's timed ones or an engine's."""
    if inputs.c is None and engine is None:
        raise SpecdecError(f"{inputs.source} holds no timed costs (c, verify_cost): estimate with timings")


def stopping_plan(inputs: StoppingInputs, max_n: int, engine: EngineCurve | None = None) -> dict[str, Any]:
    """The three plans (see the module doc), the fixed gamma and the ceiling, as one JSON-ready dict;
    with `engine`, llama.cpp's plan priced at the engine's own costs (and, where the estimate has no
    timed costs, that plan alone)."""
    require_costs(inputs, engine)
    llama_c, llama_v = (inputs.c, inputs.verify_cost) if engine is None else (engine.c, engine.verify_cost)
    llama, _, _ = _plan(inputs, llama_c, llama_v, max_n, n_mins=(0,))
    llama["flags"] = f"--spec-draft-p-min {llama['tau']:g} --spec-draft-n-min 0 --spec-draft-n-max {llama['n_max']}"
    if inputs.top_k != LLAMA_TOP_K:
        llama["note"] = (f"the law's confidence is the top probability over "
                         f"{'all tokens' if not inputs.top_k else f'the top {inputs.top_k}'}; llama.cpp's p-min reads "
                         f"it renormalised over the draft's top {LLAMA_TOP_K}: estimate with --confidence-top-k "
                         f"{LLAMA_TOP_K} for its tau")
    if engine is not None:
        llama["costs"] = {"source": engine.source, "c": engine.c, "verify_cost": list(engine.verify_cost)}
        if max(llama["speedup"], llama["fixed_gamma"]["speedup"]) < 1:
            llama["advice"] = "no speculation: no p-min makes this draft pay in the engine"
    out: dict[str, Any] = {"source": inputs.source, "alpha": float(inputs.law.alphas(1)[0]), "llama.cpp": llama}
    if inputs.c is None:
        return out
    decoder, best, top = _plan(inputs, inputs.c, inputs.verify_cost, max_n)  # n_min in 0..3
    decoder["flags"] = (f"--draft-policy confidence:tau={decoder['tau']:g},n_min={decoder['n_min']},"
                        f"n_max={decoder['n_max']}")
    hf, _, _ = _plan(inputs, inputs.c, inputs.verify_cost, max_n, n_mins=(0,), keep_last=True)
    hf["flags"] = (f"assistant_confidence_threshold={hf['tau']:g}, num_assistant_tokens={hf['n_max']}, "
                   "num_assistant_tokens_schedule=\"constant\"")
    schedule = heuristic_schedule(inputs.law, inputs.c, np.asarray(inputs.verify_cost), cap=top)
    return {**out, "c": inputs.c, "verify_cost": list(inputs.verify_cost), "max_n": top,
            "fixed_gamma": decoder["fixed_gamma"], "ceiling": {"rule": "break-even (optimal stopping)",
                                                               "speedup": best.ceiling},
            "decoder": decoder, "transformers": hf,
            "transformers_heuristic": {"speedup": schedule.speedup, "cap": top,
                                       "flags": f"num_assistant_tokens_schedule=\"heuristic\", assistant_confidence_"
                                                f"threshold=0 (num_assistant_tokens at most {top} here)"}}


def _plan(inputs: StoppingInputs, c: float, verify_cost: tuple[float, ...], max_n: int,
          n_mins: tuple[int, ...] = (0, 1, 2, 3), keep_last: bool = False) -> tuple[dict[str, Any], Any, int]:
    """One rule's plan at costs (c, v): as a dict (tau, n_min, n_max, its speedup, tokens and drafts, the
    best fixed gamma at the same costs and the gain over it), the StoppingPlan, the longest draft planned."""
    v = np.asarray(verify_cost)
    top = min(max_n, v.size - 1)
    if top < 1:
        raise SpecdecError("the verify-cost curve must give v(1..K) with K >= 2 to plan any draft")
    p = plan_stopping(inputs.law, c, v, max_n=top, n_mins=n_mins, keep_last=keep_last)
    tokens = threshold_prediction(inputs.law, [p.tau], p.n_min, p.n_max, c, v, p.keep_last)
    return {"tau": p.tau, "n_min": p.n_min, "n_max": p.n_max, "keep_last": p.keep_last, "speedup": p.speedup,
            "expected_tokens": float(tokens.expected_tokens[0]), "expected_drafts": float(tokens.expected_drafts[0]),
            "gain_over_fixed_gamma": p.gain,
            "fixed_gamma": {"gamma": p.fixed_gamma, "speedup": p.fixed_speedup}}, p, top


def stopping_text(d: dict[str, Any]) -> str:
    lines = [f"confidence law and costs: {d['source']}", f"  alpha {d['alpha']:.3f}"]
    if "decoder" in d:
        fixed = d["fixed_gamma"]
        lines[-1] += (f", c {d['c']:.4g}, v(1..{len(d['verify_cost'])}) = "
                      + ",".join(f"{x:.3g}" for x in d["verify_cost"]) + f"; drafts up to {d['max_n']}")
        lines += [f"best fixed gamma: {fixed['gamma']} -> {fixed['speedup']:.3f}X",
                  f"ceiling (break-even stopping rule): {d['ceiling']['speedup']:.3f}X"]
    lines.append("")
    for name in ("decoder", "llama.cpp", "transformers"):
        if name not in d:
            continue
        r = d[name]
        what = "keep the token below tau" if r["keep_last"] else "drop the token below tau"
        lines += [f"{name}: tau {r['tau']:g}, n_min {r['n_min']}, n_max {r['n_max']} ({what}) -> {r['speedup']:.3f}X "
                  f"({100 * r['gain_over_fixed_gamma']:+.1f}% over fixed gamma {r['fixed_gamma']['gamma']}; "
                  f"{r['expected_tokens']:.2f} tokens, {r['expected_drafts']:.2f} drafts per iteration)",
                  f"  {r['flags']}"] + ([f"  note: {r['note']}"] if r.get("note") else [])
        if r.get("costs"):
            lines += [f"  priced at the engine's costs: {r['costs']['source']}; fixed gamma "
                      f"{r['fixed_gamma']['gamma']} -> {r['fixed_gamma']['speedup']:.3f}X"]
        if r.get("advice"):
            lines += [f"  advice: {r['advice']}"]
    if "transformers_heuristic" in d:
        h = d["transformers_heuristic"]
        lines += [f"transformers heuristic schedule (+2 / -1): {h['speedup']:.3f}X", f"  {h['flags']}"]
    return "\n".join(lines)
