"""Where prediction (a) of a p-min grid (run-pmin.sh) goes wrong: per draft configuration, the engine's
measured decode seconds against (a)'s, (a)'s target part (plain steps, verifies, accepted tokens, all
from the cost file) and its draft part (the cost file's draft in the loop, `draft_loop.py`; a file
before 2026-11-28: every pass at the draft's own plain step t_d(1)) per draft pass; the draft pass
the measured seconds imply (measured - target part) / passes, and the same with the target part scaled
by the baseline's measured step over the cost file's t(1) (the target as fast as in the baseline runs);
and (a) with every draft pass at t_d(1) (the same cost file without its loop timings).
At p-min > 0 also the counts prediction (b) reads from the estimate's confidence law against the engine's:
drafted tokens per target step (every step is an attempt there), with the law past a rejection and with
position 1's in its place.

    .venv/bin/python benchmarks/data/llamacpp/pmin_parts.py DIR [SUFFIX]

DIR holds validate-pmin{SUFFIX}.json, costs-pmin{SUFFIX}.json and estimate-d2-top10{SUFFIX}.json
(benchmarks/data/llamacpp/pmin-xeon/: the Xeon kind's runs, SUFFIX "" and "-b" of 2026-11-27/28 with the costs at
contexts 128,384 and the draft at its own step, "-loop" and "-loop-b" of 2026-11-28 02:04 and 02:17 UTC with the draft
timed in the loop at contexts 64,176,288)."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from specdec.engines.llamacpp.estimated import category_estimates
from specdec.engines.llamacpp.draft_loop import draft_counts, draft_seconds
from specdec.engines.llamacpp.validation import EngineCosts, Record, from_flags, predicted_seconds


def main(folder: Path, suffix: str = "") -> None:
    v = json.loads((folder / f"validate-pmin{suffix}.json").read_text())
    costs = EngineCosts.from_file(json.loads((folder / f"costs-pmin{suffix}.json").read_text()))
    estimate = json.loads((folder / f"estimate-d2-top10{suffix}.json").read_text())
    configs = {g["label"]: from_flags(g["label"], g["flags"]) for g in v["grid"]}
    records = [Record(**r) for r in v["records"]]
    base = [r for r in records if r.config == "none"]
    measured_step = sum(r.decode_ms for r in base) / 1e3 / sum(max(r.tokens - 1, 1) for r in base)
    cost_step = float(np.mean([costs.t(1, r.prompt_tokens + r.tokens / 2) for r in base]))
    scale = measured_step / cost_step
    print(f"baseline step measured {1e3 * measured_step:.2f} ms, cost file t(1) {1e3 * cost_step:.2f} ms")
    for label, config in configs.items():
        rows = [r for r in records if r.config == label]
        if config.draft_model is None:
            continue
        measured = sum(r.decode_ms for r in rows) / 1e3
        predicted = sum(predicted_seconds(r, costs, config)[0] for r in rows)
        priced = [draft_seconds(r, config, costs.draft_parts(config.draft_model, r.prompt_tokens + r.tokens / 2))
                  for r in rows]
        passes = sum(S + Q for S, _, Q in (draft_counts(r, config) for r in rows))
        target = predicted - sum(priced)
        error = 100 * (predicted / measured - 1)
        own = sum(predicted_seconds(r, replace(costs, loops=()), config)[0] for r in rows)  # every pass at t_d(1)
        print(f"{label:24s} measured {measured:6.2f} s, (a) {predicted:6.2f} s ({error:+.1f} %; every pass at "
              f"t_d(1): {100 * (own / measured - 1):+.1f} %);"
              f" {passes:.0f} draft passes at {1e3 * sum(priced) / passes:.2f} ms; implied "
              f"{1e3 * (measured - target) / passes:.2f} ms, {1e3 * (measured - scale * target) / passes:.2f} ms with "
              f"the target at the baseline's speed")
        if config.p_min > 0:
            print(" " * 25 + counts(rows, config, estimate, folder))


def counts(rows: list, config, estimate: dict, folder: Path) -> str:
    """Drafted tokens per target step, the engine's against (b)'s law's (tokens-weighted over categories)."""
    steps = sum(max(r.tokens - 1, 1) - r.accepted for r in rows)
    out = [f"drafts a step: engine {sum(r.draft_tokens for r in rows) / steps:.3f}"]
    row1 = {c: {**e, "confidence_law": {**e["confidence_law"], "past_rejection": None}}
            for c, e in estimate["categories"].items()}
    for name, est in (("law", estimate), ("position 1's law past a rejection", {**estimate, "categories": row1})):
        found = category_estimates(est, config, folder)
        tokens = {c: sum(max(r.tokens - 1, 1) for r in rows if r.category == c) for c in found}
        steps_c = {c: tokens[c] / found[c].tokens for c in found}  # target steps the category's tokens take
        drafted = sum(steps_c[c] * float(found[c].proposed @ np.arange(found[c].proposed.size)) for c in found)
        out.append(f"{name} {drafted / sum(steps_c.values()):.3f}")
    return ", ".join(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
