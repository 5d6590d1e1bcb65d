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
