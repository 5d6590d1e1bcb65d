"""Issue 52: the draft counts of a `specdec validate --draft-policy` run (its decoders' measured
drafts and tokens per iteration) against the count predictions of the pooled law and of the
position-conditioned law, both estimated anew from the run's own estimator samples (the same
prompts, sizes and seeds as the run, read from its validation.json; nothing decoded, nothing
timed). The pooled law's predictions must equal the run's own: that checks the samples are the
same. Counts only: drafts and tokens per iteration do not depend on the clock.

    .venv/bin/python benchmarks/data/dynamic/recount.py RUN/validation.json OUT.json
    .venv/bin/python benchmarks/data/dynamic/recount.py --window 24 RUN/validation.json OUT.json
    .venv/bin/python benchmarks/data/dynamic/recount.py --stored RUN/validation.json OUT.json
(--stored: a run that stored the per-position law itself; no model is loaded.)
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from specdec.reference.model.models import load_model
from specdec.reference.core.policy import parse_policy
from specdec.reference.data.prompts import PromptSource
from specdec.reference.data.encoder_inputs import load_target_prompts
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.estimate.confidence import ConfidenceCounts
from specdec.simulator.dynamic import confidence_law
from specdec.reference.distributed.ranks import Ranks
from specdec.reference.validation.alphas import score_alpha_share, summarize_alphas
from specdec.reference.validation.config import ValidationConfig
from specdec.reference.validation.dynamic import predict_policy
from specdec.reference.validation.run import category_config
from specdec.simulator.prediction import effective_cost


def config_of(entry: dict) -> ValidationConfig:
    """The run's ValidationConfig from its JSON (tuples where the dataclass has them)."""
    c = dict(entry)
    for key in ("gammas", "temperatures", "lenience", "policies"):
        c[key] = tuple(c[key])
    return ValidationConfig(**c)


def count_rows(category: str, entry: dict, laws: dict, gamma: int) -> list[dict]:
    """Per policy row of one category: measured counts, the run's own predicted counts, and the
    counts the pooled and the per-position law predict (laws: (drafter, T) -> confidence_law)."""
    costs = {(c["drafter"], c["temperature"]): c for c in entry["cost"]}
    out = []
    for row in entry["policy_rows"]:
        key = (row["drafter"], row["temperature"])
        d = laws[key]
        pooled = ConfidenceCounts(tuple(d["edges"]), tuple(d["positions"]), tuple(d["accepted"]),
                                  tuple(d["accepted_sq"])).law()
        per_position = confidence_law(d)
        cost = costs[key]
        c_eff, v_eff = effective_cost(cost["c"], cost["verify_cost"], cost["overhead"])
        policy = parse_policy(row["policy"], gamma)
        _, tok_p, dr_p = predict_policy(policy, pooled, c_eff, np.asarray(v_eff))
        _, tok_k, dr_k = predict_policy(policy, per_position, c_eff, np.asarray(v_eff))
        out.append({"category": category, "drafter": row["drafter"], "temperature": row["temperature"],
                    "policy": row["policy"], "law_rows": int(per_position.weights.shape[0]),
                    "drafts_measured": row["drafts_per_iteration"], "tokens_measured": row["tokens_per_iteration"],
                    "drafts_run_predicted": row["drafts_per_iteration_predicted"],
                    "tokens_run_predicted": row["tokens_per_iteration_predicted"],
                    "drafts_pooled": dr_p, "tokens_pooled": tok_p, "drafts_per_position": dr_k,
                    "tokens_per_position": tok_k})
    return out


def recount(run_path: Path, window: int | None = None) -> dict:
    """Re-estimate the laws of an earlier run from its estimator samples (loads the models);
    `window`: only the first `window` tokens of each continuation (at T = 0 the same tokens as
    the longer samples' first ones), e.g. the decodes' --new-tokens."""
    run = json.loads(run_path.read_text(encoding="utf-8"))
    categories = run["categories"]
    first = next(iter(categories.values()))
    target = load_model(first["target"], "cpu", "float32", first["machine"]["backend"])
    drafters = {label: make_drafter(spec, target, "cpu", "float32")[0] for label, spec in first["drafters"].items()}
    config = config_of(first["config"])
    prompt_set = load_target_prompts(target, max(config.prompts, config.alpha_prompts),
                                     PromptSource(workloads=tuple(categories)))
    out = {"run": str(run_path), "window": window, "rows": [], "laws": {}}
    try:
        for category, entry in categories.items():
            cfg = category_config(config_of(entry["config"]), prompt_set, category)
            cfg = cfg if window is None else replace(cfg, alpha_new_tokens=window)
            ids = prompt_set.of(category)[:cfg.alpha_prompts]
            share = score_alpha_share(target, drafters, ids, Ranks().share(len(ids), cfg.batch_size), cfg)
            alphas, _ = summarize_alphas([share], len(ids), list(drafters), cfg)
            laws = {key: a.confidence_law for key, a in alphas.items()}
            out["laws"][category] = [{"drafter": k[0], "temperature": k[1], "confidence_law": d} for k, d in laws.items()]
            out["rows"] += count_rows(category, entry, laws, max(cfg.gammas))
    finally:
        for drafter in drafters.values():
            drafter.close()
    return out


def from_file(run_path: Path) -> dict:
    """The laws a run stored itself (runs since the per-position law): no model is loaded."""
    run = json.loads(run_path.read_text(encoding="utf-8"))
    out = {"run": str(run_path), "rows": []}
    for category, entry in run["categories"].items():
        laws = {(a["drafter"], a["temperature"]): a["confidence_law"] for a in entry["alpha"]}
        out["rows"] += count_rows(category, entry, laws, max(entry["config"]["gammas"]))
    return out


def close(predicted: float, measured: float) -> bool:
    """A count prediction matches: within 10 % or, for counts near 0, 0.05 absolute."""
    return abs(predicted - measured) <= max(0.1 * abs(measured), 0.05)


def table(out: dict) -> str:
    """Markdown rows: measured / pooled / per-position, * = the prediction misses (`close`)."""
    def cell(r: dict, what: str) -> str:
        m, p, k = r[f"{what}_measured"], r[f"{what}_pooled"], r[f"{what}_per_position"]
        return f"{m:.2f} / {p:.2f}{'' if close(p, m) else '*'} / {k:.2f}{'' if close(k, m) else '*'}"

    lines = ["| workload | drafter | T | rule | rows | drafts/iter meas. / pooled / per-position | "
             "tokens/iter meas. / pooled / per-position |", "|---|---|---|---|---|---|---|"]
    for r in out["rows"]:
        rule = r["policy"].replace("confidence:tau=", "τ ").replace(",n_max=6", "").split(":")[0]
        lines.append(f"| {r['category']} | {r['drafter']} | {r['temperature']:g} | {rule} | {r['law_rows']} | "
                     f"{cell(r, 'drafts')} | {cell(r, 'tokens')} |")
    n = len(out["rows"])
    for law in ("pooled", "per_position"):
        both = sum(close(r[f"drafts_{law}"], r["drafts_measured"]) and close(r[f"tokens_{law}"], r["tokens_measured"])
                   for r in out["rows"])
        lines.append(f"\n{law}: drafts and tokens both match in {both}/{n} rows")
    return "\n".join(lines)


if __name__ == "__main__":
    # --stored: read the laws the run stored (it has per_position); else re-estimate them
    # --window N: estimate on the first N tokens of each continuation only
    stored = "--stored" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--stored"]
    window = None
    if "--window" in args:
        i = args.index("--window")
        window, args = int(args[i + 1]), args[:i] + args[i + 2:]
    result = from_file(Path(args[0])) if stored else recount(Path(args[0]), window)
    Path(args[1]).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(table(result))
