"""`specdec plan --stopping` (issue 52): the confidence-threshold plan from an estimate's joint law
of (draft confidence, acceptance) and its costs, the engines' flags, and one-line errors."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from specdec.cli import cli
from specdec.reference.estimate.confidence import EDGES, ConfidenceCounts
from specdec.simulator.dynamic import plan_stopping
from specdec.simulator.prediction import effective_cost

V = [1.0, 1.02, 1.05, 1.08, 1.12, 1.16, 1.2, 1.25, 1.3]
OVERHEAD = [0.05] * len(V)


def _law(seed: int = 0) -> dict:
    """Counts of a drafter whose acceptance rises with its confidence."""
    rng = np.random.default_rng(seed)
    conf = rng.beta(0.7, 0.7, 4000)
    beta = (rng.random(4000) < conf ** 1.5).astype(float)
    return ConfidenceCounts.of(conf, beta, EDGES).to_dict()


def _estimate(tmp_path, **extra):
    d = {"kind": "specdec.estimate", "confidence_law": _law(), "c": 0.05,
         "cost": {"c": 0.05, "verify_cost": V, "overhead": OVERHEAD}, **extra}
    path = tmp_path / "estimate.json"
    path.write_text(json.dumps(d))
    return path


def _plan(*args):
    return CliRunner().invoke(cli, ["plan", *args])


def test_stopping_plan_matches_the_simulator(tmp_path) -> None:
    result = _plan("--stopping", str(_estimate(tmp_path)), "--max-gamma", "8", "--json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    c, v = effective_cost(0.05, V, OVERHEAD)
    law = ConfidenceCounts(**{k: tuple(_law()[k]) for k in ("edges", "positions", "accepted", "accepted_sq")}).law()
    want = plan_stopping(law, c, v, max_n=8, n_mins=(0,))
    got = d["llama.cpp"]
    assert (got["tau"], got["n_max"], got["n_min"]) == (want.tau, want.n_max, 0)
    assert got["speedup"] == pytest.approx(want.speedup)
    assert got["flags"] == f"--spec-draft-p-min {want.tau:g} --spec-draft-n-min 0 --spec-draft-n-max {want.n_max}"
    assert d["transformers"]["keep_last"] and "assistant_confidence_threshold=" in d["transformers"]["flags"]
    assert d["decoder"]["flags"].startswith("--draft-policy confidence:tau=")
    # a threshold never loses to fixed gamma (tau = 0 is one of its choices) nor beats the ceiling by much
    for name in ("decoder", "llama.cpp", "transformers"):
        assert d[name]["speedup"] >= d["fixed_gamma"]["speedup"] * (1 - 1e-9) or d[name]["keep_last"]
        assert d[name]["speedup"] <= d["ceiling"]["speedup"] * 1.01
    assert d["decoder"]["gain_over_fixed_gamma"] == pytest.approx(d["decoder"]["speedup"] / d["fixed_gamma"]["speedup"] - 1)
    text = _plan("--stopping", str(_estimate(tmp_path)), "--max-gamma", "8").output
    assert "--spec-draft-p-min" in text and "num_assistant_tokens" in text and "ceiling" in text
    # llama.cpp's p-min reads the top-10 renormalised confidence: a law over every token says so
    assert "--confidence-top-k 10" in got["note"] and "note: the law's confidence" in text
    top10 = _estimate(tmp_path, confidence_law={**_law(), "top_k": 10})
    assert "note" not in json.loads(_plan("--stopping", str(top10), "--max-gamma", "8", "--json").output)["llama.cpp"]


def test_stopping_reads_a_validation_file(tmp_path) -> None:
    entry = {"drafter": "d", "temperature": 0.0}
    d = {"categories": {"code": {"alpha": [{**entry, "confidence_law": _law()}],
                                 "cost": [{**entry, "c": 0.05, "verify_cost": V, "overhead": OVERHEAD}]},
                        "edit": {"alpha": [], "cost": []}}}
    path = tmp_path / "validation.json"
    path.write_text(json.dumps(d))
    ok = _plan("--stopping", str(path), "--category", "code", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["source"].endswith("[code] d at T=0")
    missing = _plan("--stopping", str(path))
    assert missing.exit_code == 2 and "--category" in missing.output


@pytest.mark.parametrize("change, args, message", [
    ({"confidence_law": None}, [], "no confidence_law"),
    ({"cost": {"c": 0.05}}, [], "no timed costs"),
    ({}, ["--alpha", "0.5"], "--stopping plans from"),
    ({}, ["--drafter", "x"], "within a validation.json"),
])
def test_stopping_errors_are_one_line(tmp_path, change, args, message) -> None:
    result = _plan("--stopping", str(_estimate(tmp_path, **change)), *args)
    assert result.exit_code == 2 and message in result.output


def test_stopping_options_need_stopping() -> None:
    result = _plan("--alpha", "0.5", "--c", "0.1", "--category", "code")
    assert result.exit_code == 2 and "needs --stopping" in result.output


def _engine_costs(tmp_path, drafts: int = 1, loop: bool = True) -> tuple:
    """A llama.cpp cost file at one context: t(1..5) and a draft's loop costs (P0, P1, s)."""
    t = [0.020, 0.028, 0.034, 0.040, 0.046]
    parts = (0.004, 0.0005, 0.003)
    timed = {f"/m/d{i}.gguf": {"context_tokens": [200], "seconds": [0.002],
                               **({"loop": {"context_tokens": [200], "batch_pass": [parts[0]], "per_token": [parts[1]],
                                            "look": [parts[2]]}} if loop else {})} for i in range(drafts)}
    d = {"kind": "specdec.estimate", "source": "llama-server", "accept_seconds": 0.0, "draft_seconds": timed,
         "batch_timing": [{"batch_sizes": [1], "seconds": [t], "context_tokens": 200}]}
    path = tmp_path / f"costs{drafts}.json"
    path.write_text(json.dumps(d))
    return path, t, parts


def test_stopping_prices_llamacpp_at_the_engines_own_costs(tmp_path) -> None:
    """With a llama.cpp cost file the llama.cpp plan is the simulator's at c = s / t(1) and v(k) =
    (t(k) + P0 + P1 (k - 1)) / t(1) (every step pays the draft's pass over its batch), the other
    plans unchanged; an estimate without timed costs plans llama.cpp alone; a draft that never pays
    is advised against."""
    costs, t, (p0, p1, s) = _engine_costs(tmp_path)
    law = ConfidenceCounts(**{k: tuple(_law()[k]) for k in ("edges", "positions", "accepted", "accepted_sq")}).law()
    v = [(t[k - 1] + p0 + p1 * (k - 1)) / t[0] for k in range(1, 6)]
    want = plan_stopping(law, s / t[0], v, max_n=4, n_mins=(0,))
    plain = json.loads(_plan("--stopping", str(_estimate(tmp_path)), "--max-gamma", "8", "--json").output)
    result = _plan("--stopping", str(_estimate(tmp_path)), "--batch-cost-file", str(costs), "--context", "200",
                   "--max-gamma", "8", "--json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    got = d["llama.cpp"]
    assert (got["tau"], got["n_max"], got["speedup"]) == (want.tau, want.n_max, pytest.approx(want.speedup))
    assert got["fixed_gamma"] == {"gamma": want.fixed_gamma, "speedup": pytest.approx(want.fixed_speedup)}
    assert got["costs"]["verify_cost"] == pytest.approx(v) and got["costs"]["c"] == pytest.approx(s / t[0])
    assert d["decoder"] == plain["decoder"] and d["transformers"] == plain["transformers"]
    assert got["speedup"] < plain["llama.cpp"]["speedup"]  # the batch pass costs every step
    untimed = _estimate(tmp_path, cost=None, context=200)
    alone = json.loads(_plan("--stopping", str(untimed), "--batch-cost-file", str(costs), "--json").output)
    assert set(alone) == {"source", "alpha", "llama.cpp"}
    assert alone["llama.cpp"]["speedup"] == pytest.approx(want.speedup)
    assert ("advice" in alone["llama.cpp"]) == (max(want.speedup, want.fixed_speedup) < 1)
    dear = tmp_path / "dear.json"  # a batch pass of 2 t(1): no p-min pays
    dear.write_text(costs.read_text().replace(f'"batch_pass": [{p0}]', '"batch_pass": [0.04]'))
    advised = json.loads(_plan("--stopping", str(untimed), "--batch-cost-file", str(dear), "--json").output)
    assert advised["llama.cpp"]["advice"].startswith("no speculation") and advised["llama.cpp"]["speedup"] < 1
    assert "advice: no speculation" in _plan("--stopping", str(untimed), "--batch-cost-file", str(dear)).output
    no_costs = _plan("--stopping", str(untimed))
    assert no_costs.exit_code == 2 and "no timed costs" in no_costs.output and "--stopping" in no_costs.output
    listed = tmp_path / "listed.json"
    listed.write_text(costs.read_text().replace('"draft_seconds": {', '"draft_seconds": [{')  # a list, not a map
                      .replace('}}}, "batch', '}}}], "batch'))
    for path, args, message in ((_engine_costs(tmp_path, drafts=2)[0], ["--context", "200"], "times 2 draft models"),
                                (listed, ["--context", "200"], "not a llama.cpp cost file"),
                                (costs, [], "give --context"), (_estimate(tmp_path), ["--context", "200"],
                                                                 "not a llama.cpp cost file")):
        bad = _plan("--stopping", str(_estimate(tmp_path)), "--batch-cost-file", str(path), *args)
        assert bad.exit_code == 2 and message in bad.output and "--batch-cost-file" in bad.output


def test_the_engines_advice_on_the_captured_pmin_grid() -> None:
    """benchmarks/data/llamacpp/pmin-xeon/*-loop.json (a real llama-server, the Xeon, 2026-11-28): the
    plan at the engine's costs advises no speculation with d2-q8_0 on every category, and in the same
    run every draft row (p-min 0 to 0.9, n-max 4) measured below 1 while ngram-simple paid."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "llamacpp" / "pmin-xeon"
    for category in ("code", "edit", "chat"):
        d = json.loads(_plan("--stopping", str(data / "estimate-d2-top10-loop.json"), "--category", category,
                             "--batch-cost-file", str(data / "costs-pmin-loop.json"), "--json").output)
        assert "no speculation" in d["llama.cpp"]["advice"] and d["llama.cpp"]["speedup"] < 1
    cells = {c["config"]: c["measured"] for c in json.loads((data / "validate-pmin-loop.json").read_text())["cells"]}
    assert all(m < 1 for name, m in cells.items() if name.startswith("draft")) and cells["ngram-simple g4"] > 1
