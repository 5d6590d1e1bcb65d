"""`specdec estimate` through click's CliRunner on a tiny saved model with a word-level
tokenizer: the JSON has the documented keys, a model against itself gives alpha = 1, and
bad input is a one-line error."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specdec.cli import cli, main

KEYS = {"alpha", "alpha_ci", "c", "c_hat", "verify_cost", "beta_quantiles", "beta_histogram", "alpha_lenience",
        "n_positions", "proposal_rate", "alpha_when_proposed", "estimates", "cost", "sampling", "drafter"}


def _run(args: list[str]) -> dict:
    result = CliRunner().invoke(cli, ["estimate", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _common(pair) -> list[str]:
    return ["--target", str(pair.target), "--prompts-file", str(pair.prompts), "--tokens", "60", "--new-tokens",
            "10", "--max-k", "4", "--timing-repeats", "2", "--bootstrap", "100"]


@pytest.mark.parametrize("temperature", ["0", "1"])
def test_estimate_json_keys(tiny_pair, temperature: str) -> None:
    d = _run(_common(tiny_pair) + ["--drafter", f"model:{tiny_pair.draft}", "--temperature", temperature,
                                   "--lenience", "1,0.5"])
    assert KEYS <= set(d)
    assert 0 <= d["alpha_ci"][0] <= d["alpha"] <= d["alpha_ci"][1] <= 1
    assert d["n_positions"] == 60 and d["prompts"] == 6
    assert len(d["verify_cost"]) == 4 and d["verify_cost"][0] == 1.0
    assert d["c"] > 0 and d["c_hat"] == pytest.approx(1.0)
    assert set(d["alpha_lenience"]) == {"1", "0.5"}
    assert set(d["replay"]) == {"1", "2", "3"}  # gamma < --max-k; a neural draft's deeper drafts known at any T
    times = d["context_times"]  # the prompts' shortest, the context of the costs, the longest + new tokens
    assert d["context"] in times["contexts"] and times["contexts"] == sorted(times["contexts"])
    assert times["seconds"][times["contexts"].index(d["context"])] == d["cost"]["verify_seconds"]


def test_estimate_times_given_contexts_for_the_plan(tiny_pair, tmp_path) -> None:
    d = _run(_common(tiny_pair) + ["--drafter", "lookup", "--context", "20", "--contexts", "8,40"])
    assert d["context_times"]["contexts"] == [8, 20, 40] and all(len(s) == 4 for s in d["context_times"]["seconds"])
    path = tmp_path / "estimate.json"
    path.write_text(json.dumps(d))
    result = CliRunner().invoke(cli, ["plan", "--alpha", "0.5", "--c", "0", "--verify-cost-file", str(path),
                                      "--context", "30", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["context"]["interpolated_between"] == [20, 40]


def test_estimate_self_is_one_and_lookup_is_documented(tiny_pair) -> None:
    d = _run(_common(tiny_pair) + ["--drafter", f"model:{tiny_pair.target}", "--temperature", "1", "--no-timing"])
    assert d["alpha"] == pytest.approx(1.0, abs=1e-6) and d["c"] is None and d["c_hat"] == pytest.approx(1.0)
    d = _run(_common(tiny_pair) + ["--drafter", "lookup:2", "--no-timing"])
    assert d["c_hat"] == 0.0 and 0 <= d["proposal_rate"] <= 1
    assert "without a proposal count as rejections" in d["estimates"]


def test_estimate_continues_each_prompt_several_times(tiny_pair) -> None:
    """--samples-per-prompt 3: a third of the prompts, each sampled three times (60 positions still),
    and the sampler's min-p recorded."""
    d = _run(_common(tiny_pair) + ["--drafter", "lookup:2", "--no-timing", "--temperature", "1",
                                   "--samples-per-prompt", "3", "--top-k", "40", "--min-p", "0.05"])
    assert d["prompts"] == 2 and d["samples_per_prompt"] == 3 and d["n_positions"] == 60
    assert d["sampling"] == {"temperature": 1.0, "top_k": 40, "top_p": 1.0, "min_p": 0.05}


def test_estimate_human_output(tiny_pair) -> None:
    result = CliRunner().invoke(cli, ["estimate", *_common(tiny_pair), "--drafter", "lookup", "--no-timing"])
    assert result.exit_code == 0, result.output
    assert "alpha" in result.stdout and "95% CI" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--lenience", "2"], "lenience"),
    (["--tokens", "0"], "--tokens"),
    (["--drafter", "bogus"], "unknown drafter"),
    (["--drafter", "none"], "needs a drafter"),
    (["--drafter", "lookup", "--contexts", "30"], "--contexts times the verify-cost curve"),
    (["--drafter", "lookup", "--contexts", "30,20"], "--contexts"),
    (["--drafter", "lookup", "--samples-per-prompt", "2"], "--samples-per-prompt"),
    (["--drafter", "lookup", "--min-p", "1.5"], "--min-p"),
])
def test_bad_input_is_a_one_line_error(tiny_pair, capsys, args, message) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--target", str(tiny_pair.target), "--prompts-file", str(tiny_pair.prompts),
              "--no-timing", "--tokens", "10", "--new-tokens", "5", *args])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert any(message in line for line in err) and "Traceback" not in "\n".join(err)


def test_missing_prompts_file_is_a_one_line_error(tiny_pair, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["estimate", "--target", str(tiny_pair.target), "--prompts-file", str(tiny_pair.root / "nope.txt"),
              "--drafter", "lookup", "--no-timing"])
    err = capsys.readouterr().err
    assert "nope.txt" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["eagle", "lattice"])
def test_a_token_tree_is_estimated(tiny_pair, tmp_path, kind) -> None:
    """eagle:DIR,tree=N and heads:DIR,k=..,p=.., at T = 0 and 1: alpha is the first level's
    acceptance and the replay walks each draft length's tree along the target's samples."""
    from transformers import AutoModelForCausalLM

    from specdec.reference.eagle.store import save_eagle
    from specdec.reference.heads.store import save_heads, weights_fingerprint
    from tests.fakes import random_eagle, random_heads

    model = AutoModelForCausalLM.from_pretrained(tiny_pair.target)
    card = {"target": {"name": "target", "weights_sha256": weights_fingerprint(tiny_pair.target)}}
    if kind == "eagle":
        save_eagle(random_eagle(model, seed=5), card, tmp_path / "eagle")
        spec = f"eagle:{tmp_path / 'eagle'},tree=4,topk=2"
    else:
        heads = random_heads(model, 3, scale=0.05)
        save_heads(heads, {**card, "n_heads": 3, "vocab": int(heads.vocab.numel())}, tmp_path / "heads")
        spec = f"heads:{tmp_path / 'heads'},k=3,p=2"
    for temperature in ("0", "1"):
        d = _run(_common(tiny_pair) + ["--drafter", spec, "--no-timing", "--temperature", temperature])
        assert "token tree" in d["estimates"] and d["proposal_rate"] == 1
        assert (0 < d["alpha"] <= 1) if temperature == "1" else (0 <= d["alpha"] <= 1)  # T = 1: p(roots) > 0
        assert set(d["replay"]) == {"1", "2", "3"}
        assert all(1 <= r["tokens_per_iteration"] <= int(g) + 1 for g, r in d["replay"].items())
