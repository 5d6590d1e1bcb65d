"""`specdec validate` through click's CliRunner on tiny saved models: JSON keys, the files
and figures it writes, and one-line errors for bad input."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specdec.cli import cli, main
from tests.cli_helpers import refuse_constant

ROW_KEYS = {"drafter", "temperature", "gamma", "measured", "paper", "extended", "extended_estimated",
            "error_paper", "error_extended", "error_extended_estimated", "alpha_estimate", "alpha_decode",
            "alpha_decode_in_ci", "alpha_per_position", "extended_within_tolerance"}


def _args(pair, out) -> list[str]:
    return ["validate", "--target", str(pair.target), "--prompts-file", str(pair.prompts),
            "--drafter", f"tiny=model:{pair.draft}", "--drafter", "lookup:2", "--gammas", "1,2",
            "--temperatures", "0,1", "--prompts", "2", "--new-tokens", "12", "--alpha-tokens", "24",
            "--alpha-new-tokens", "12",
            "--max-k", "4", "--timing-repeats", "2", "--retries", "0", "--out", str(out)]


def test_validate_json_and_files(tiny_pair, tmp_path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [*_args(tiny_pair, out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout, parse_constant=refuse_constant)
    assert {"rows", "alpha", "cost", "plan", "verify_cost", "config", "machine", "figures", "notes"} <= set(d)
    assert len(d["rows"]) == 2 * 2 * 2 and all(ROW_KEYS <= set(r) for r in d["rows"])
    assert {r["drafter"] for r in d["rows"]} == {"tiny", "lookup:2"}
    assert d["drafters"] == {"tiny": f"model:{tiny_pair.draft}", "lookup:2": "lookup:2"}
    for name in ("validation.json", "validation.md", "validation_predicted_vs_measured.png",
                 "validation_speedup_by_gamma.png", "validation_verify_cost.png", "validation_beta.png",
                 "validation_relative_error.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0
    assert json.loads((out / "validation.json").read_text())["configurations"] == 8


def test_validate_prints_tables(tiny_pair, tmp_path) -> None:
    result = CliRunner().invoke(cli, [*_args(tiny_pair, tmp_path / "o"), "--no-figures", "--gammas", "1",
                                      "--temperatures", "0"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for heading in ("## Plan", "## Measured alpha", "## Predicted vs measured speedup", "| M_p | M_q | SMPL | alpha |"):
        assert heading in result.stdout


@pytest.mark.parametrize("extra, message", [
    (["--gammas", "0"], "gammas"),
    (["--gammas", "1,x"], "comma-separated"),
    (["--temperatures", "-1"], "temperatures"),
    (["--gammas", "4"], "max-k"),
    (["--drafter", "none"], "baseline"),
])
def test_bad_input_is_a_one_line_error(tiny_pair, tmp_path, capsys, extra, message) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*_args(tiny_pair, tmp_path / "o"), *extra])
    assert exc.value.code != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_validate_draft_policies(tiny_pair, tmp_path) -> None:
    """Dynamic draft length (issue 52): each rule decodes beside the fixed gammas and gets a row with
    the prediction from the estimator's confidence law; the threshold decision names a decoded rule."""
    out = tmp_path / "o"
    args = [*_args(tiny_pair, out), "--no-figures", "--gammas", "1,2", "--thresholds", "0.3,0.9",
            "--draft-policy", "heuristic:initial=1,n_max=3,persist=1", "--json"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout, parse_constant=refuse_constant)
    rows = d["policy_rows"]
    # the model drafter has a confidence law; prompt lookup does not (no rows)
    assert {(r["drafter"], r["temperature"], r["policy"]) for r in rows} == {
        ("tiny", t, p) for t in (0.0, 1.0) for p in ("confidence:tau=0.3", "confidence:tau=0.9",
                                                     "heuristic:initial=1,n_max=3,persist=1")}
    for r in rows:
        assert r["measured"] > 0 and r["predicted"] > 0 and abs(r["error"] - (r["predicted"] / r["measured"] - 1)) < 1e-12
        assert 0 <= r["drafts_per_iteration"] <= r["n_max"]
    assert {r["tau"] for r in rows} == {0.3, 0.9, None}
    decisions = d["policy_decisions"]
    assert len(decisions) == 2 and all(x["pick"].startswith("confidence:") and x["fixed_best"] for x in decisions)
    assert "Dynamic draft length" in (out / "validation.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--thresholds", "0.33"], "edge"),
    (["--draft-policy", "confidence:tau=0.5,n_max=4"], "max-k"),
    (["--draft-policy", "nope"], "unknown draft-length rule"),
])
def test_bad_draft_policy_is_a_one_line_error(tiny_pair, tmp_path, capsys, extra, message) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*_args(tiny_pair, tmp_path / "o"), *extra])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
