"""`specdec decode` end to end on tiny local model folders (the real command, JSON parsed)."""
import json

import pytest
from click.testing import CliRunner

from specdec.cli import cli, main
from tests.tiny_models import save_tiny_model

PROMPT = "w1 w2 w3 w4 w1 w2"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return (save_tiny_model(root / "target", seed=0), save_tiny_model(root / "draft", seed=1),
            save_tiny_model(root / "other", vocab_size=40, seed=2))


def run(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["decode", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("drafter", ["lookup", "lookup:2", "lookup:2:earliest", "model:{draft}", "none"])
def test_greedy_decode_matches_baseline(folders, drafter: str) -> None:
    target, draft, _ = folders
    out = run("--prompt", PROMPT, "--target", str(target), "--drafter", drafter.format(draft=draft),
              "--gamma", "3", "--max-new-tokens", "20", "--ignore-eos", "--baseline")
    assert out["baseline"]["same_tokens"] is True
    assert out["stats"]["new_tokens"] == 20 and len(out["tokens"]) == 20
    assert sum(out["stats"]["accepted_hist"]) == out["stats"]["iterations"]


def test_sampled_decode_repeats_with_seed(folders) -> None:
    target, draft, _ = folders
    args = ("--prompt", PROMPT, "--target", str(target), "--drafter", f"model:{draft}", "--temperature", "1",
            "--top-p", "0.9", "--max-new-tokens", "15", "--ignore-eos", "--seed", "5")
    assert run(*args)["tokens"] == run(*args)["tokens"]


@pytest.mark.parametrize("policy", ["confidence:tau=0.3,n_min=1", "heuristic:n_max=8"])
def test_greedy_decode_under_a_draft_policy_matches_baseline(folders, policy: str) -> None:
    target, draft, _ = folders
    out = run("--prompt", PROMPT, "--target", str(target), "--drafter", f"model:{draft}", "--gamma", "3",
              "--draft-policy", policy, "--max-new-tokens", "20", "--ignore-eos", "--baseline")
    assert out["baseline"]["same_tokens"] is True and out["draft_policy"] == policy
    assert len(out["stats"]["proposed_hist"]) == (4 if policy.startswith("confidence") else 9)


@pytest.mark.parametrize("args, message", [
    (["--target", "/nonexistent/model"], "is not a Hugging Face model folder"),
    (["--drafter", "model:{other}"], "vocabulary mismatch"),
    (["--drafter", "beam:3"], "unknown drafter"),
    (["--drafter", "lookup:2:first"], "lookup[:N[:earliest|latest]]"),
    (["--temperature", "-1"], "'--temperature': must be finite and in [0, inf)"),
    (["--draft-policy", "greedy"], "--draft-policy: unknown draft-length rule 'greedy'"),
    (["--draft-policy", "confidence:tau=2"], "--draft-policy: the confidence threshold tau must be in [0, 1]"),
    (["--draft-policy", "heuristic:n_max=500"], "--draft-policy: drafts up to 500 tokens"),
])
def test_bad_input_is_one_line(folders, capsys, args, message) -> None:
    target, _, other = folders
    argv = ["decode", "--prompt", PROMPT, "--target", str(target), *[a.format(other=other) for a in args]]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("Error:") and message in err[-1], err
    assert not any("Traceback" in line for line in err)


def test_draft_policy_is_checked_before_the_target(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["decode", "--prompt", PROMPT, "--target", "/nonexistent/model", "--draft-policy", "confidence:tau"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "--draft-policy: confidence: expected key=value" in err[0], err
