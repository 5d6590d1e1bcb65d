"""Bad and edge input to `decode`, `estimate` and `bild`, through the real command line
(`specdec.cli.main`): every usage error is one line naming the option with exit status 2,
checked before any model loads; library errors one line with status 1; never a traceback;
every `--json` output parses with a strict parser (no NaN / Infinity)."""
from __future__ import annotations

import sys

import pytest
import torch

from specdec.reference.core.sampling import SamplingConfig
from tests.cli_helpers import run_main as run
from tests.cli_helpers import strict_json
from tests.tiny_models import save_tiny_model

PROMPT = "w1 w2 w3 w4 w1 w2"


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("models") / "target", seed=0)


def expect_usage_error(capsys, argv: list[str], option: str) -> str:
    code, out, err = run(capsys, argv)
    lines = err.strip().splitlines()
    assert code == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("Error:") and option in lines[0], lines
    assert out == ""
    return lines[0]


@pytest.mark.parametrize("args, option", [
    (["--gamma", "1000000000"], "--gamma"),                  # used to hang
    (["--gamma", "-1"], "--gamma"),
    (["--lenience", "0"], "--lenience"),                     # used to accept: output = the drafter's text
    (["--lenience", "nan"], "--lenience"),
    (["--lenience", "2"], "--lenience"),
    (["--temperature", "inf"], "--temperature"),
    (["--temperature", "nan"], "--temperature"),
    (["--top-p", "0"], "--top-p"),
    (["--top-p", "2"], "--top-p"),
    (["--top-k", "-3"], "--top-k"),
    (["--max-new-tokens", "0"], "--max-new-tokens"),
    (["--max-new-tokens", "600"], "--max-new-tokens"),        # beyond the tiny model's 512 positions
    (["--seed", "1180591620717411303424"], "--seed"),
    (["--seed", "-1"], "--seed"),
    (["--drafter", "ngram:/nonexistent/model"], "--drafter"),
    (["--drafter", "lookup:x"], "--drafter"),
])
def test_decode_usage_errors(capsys, target, args, option) -> None:
    expect_usage_error(capsys, ["decode", "--prompt", PROMPT, "--target", str(target), *args], option)


def test_decode_prompt_past_the_context(capsys, target) -> None:
    line = expect_usage_error(capsys, ["decode", "--prompt", " ".join(["w1"] * 500), "--target", str(target),
                                       "--max-new-tokens", "20"], "--prompt")
    assert "512" in line


def test_invalid_utf8_prompt(capsys, target) -> None:
    bad = b"\xff\xfe bad utf8".decode("utf-8", "surrogateescape")  # what the shell hands Python
    expect_usage_error(capsys, ["decode", "--prompt", bad, "--target", str(target)], "--prompt")
    expect_usage_error(capsys, ["bild", "--prompt", bad, "--target", str(target)], "--prompt")


def test_invalid_utf8_prompts_file(capsys, target, tmp_path) -> None:
    path = tmp_path / "prompts.txt"
    path.write_bytes(b"w1 w2\n\xff\xfe w3\n")
    code, _, err = run(capsys, ["estimate", "--target", str(target), "--drafter", "lookup", "--prompts-file",
                                str(path), "--no-timing", "--tokens", "10", "--new-tokens", "5"])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "prompts.txt" in err and "UTF-8" in err


@pytest.mark.parametrize("remove, message", [("model.safetensors", "no weights"),
                                             ("tokenizer.json", "cannot load the tokenizer")])
def test_incomplete_target_folder(capsys, tmp_path, remove, message) -> None:
    folder = save_tiny_model(tmp_path / "m")
    (folder / remove).unlink()
    line = expect_usage_error(capsys, ["decode", "--prompt", PROMPT, "--target", str(folder)], "--target")
    assert message in line


def test_corrupt_weights(capsys, tmp_path) -> None:
    folder = save_tiny_model(tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    code, _, err = run(capsys, ["decode", "--prompt", PROMPT, "--target", str(folder)])
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "cannot load the weights" in err and str(folder) in err


def test_decode_json_is_strict_when_nothing_is_drafted(capsys, target) -> None:
    """A prompt with no repeat: prompt lookup never proposes, alpha is undefined -> null."""
    code, out, _ = run(capsys, ["decode", "--prompt", "w9 w8 w7", "--target", str(target), "--drafter", "lookup",
                                "--max-new-tokens", "3", "--ignore-eos", "--json"])
    d = strict_json(out)
    assert code == 0 and d["stats"]["drafted"] == 0 and d["stats"]["alpha"] is None


def test_tiny_temperature_is_not_nan(capsys, target) -> None:
    """T = 1e-38 used to overflow logits / T into a NaN softmax; now it tends to greedy."""
    code, out, _ = run(capsys, ["decode", "--prompt", PROMPT, "--target", str(target), "--temperature", "1e-38",
                                "--drafter", "none", "--max-new-tokens", "8", "--ignore-eos", "--json"])
    greedy = run(capsys, ["decode", "--prompt", PROMPT, "--target", str(target), "--drafter", "none",
                          "--max-new-tokens", "8", "--ignore-eos", "--json"])[1]
    assert code == 0 and strict_json(out)["tokens"] == strict_json(greedy)["tokens"]


def test_sampling_transform_is_finite_for_any_temperature() -> None:
    logits = torch.tensor([[3.0, 1.0, 3.0, -2.0], [1e4, -1e4, 0.0, 5.0]])
    for t in (1e-38, 1e-12, 1e-3, 1.0, 1e6):
        p = SamplingConfig(t).probs(logits)
        assert torch.isfinite(p).all() and torch.allclose(p.sum(-1), torch.ones(2))
    assert torch.allclose(SamplingConfig(1e-38).probs(logits)[0], torch.tensor([0.5, 0.0, 0.5, 0.0]))
    for bad in (float("inf"), float("nan"), -1.0):
        with pytest.raises(ValueError, match="temperature"):
            SamplingConfig(bad)


@pytest.mark.parametrize("args, option", [
    (["--context", "100000"], "--context"),                  # beyond the model's 512 positions
    (["--new-tokens", "600"], "--new-tokens"),
    (["--max-k", "1000"], "--max-k"),
    (["--lenience", "0,1"], "--lenience"),
    (["--temperature", "inf"], "--temperature"),
    (["--drafter", "none"], "--drafter"),
    (["--confidence-top-k", "10"], "--confidence-top-k"),    # prompt lookup reports no confidence
    (["--confidence-top-k", "-1"], "--confidence-top-k"),
])
def test_estimate_usage_errors(capsys, target, args, option) -> None:
    expect_usage_error(capsys, ["estimate", "--target", str(target), "--drafter", "lookup", *args], option)


def test_estimate_warns_about_few_prompts(capsys, target, tmp_path) -> None:
    path = tmp_path / "prompts.txt"
    path.write_text("w1 w2 w3 w1 w2\n")
    code, out, _ = run(capsys, ["estimate", "--target", str(target), "--drafter", "lookup", "--prompts-file",
                                str(path), "--tokens", "8", "--new-tokens", "8", "--no-timing", "--json"])
    d = strict_json(out)
    assert code == 0 and d["prompts"] == 1 and any("unreliable" in w for w in d["warnings"])


@pytest.mark.parametrize("args, option", [
    (["--heldout", "0"], "--heldout"),                       # used to be an IndexError
    (["--prompt-tokens", "0"], "--prompt-tokens"),
    (["--fallback", "1.5"], "--fallback"),
    (["--max-little-steps", "0"], "--max-little-steps"),
    (["--sweep", "--out", "/proc/specdec-not-writable"], "--out"),
    (["--sweep", "--fallbacks", "0.1,nan", "--out", "x"], "--fallbacks"),
    (["--sweep", "--gammas", "1,1", "--out", "x"], "--gammas"),
])
def test_bild_usage_errors(capsys, target, args, option) -> None:
    expect_usage_error(capsys, ["bild", "--target", str(target), "--drafter", "lookup", *args], option)


def test_bild_json_is_strict(capsys, target) -> None:
    """Rates that are undefined (nothing kept, no rollback) are null, never NaN."""
    code, out, _ = run(capsys, ["bild", "--target", str(target), "--drafter", "lookup", "--prompt", "w9 w8 w7",
                                "--max-new-tokens", "4", "--ignore-eos", "--json"])
    d = strict_json(out)
    assert code == 0 and d["prompts"] == 1 and len(d["rows"]) == 2


@pytest.mark.parametrize("args, option", [
    (["--out", "/proc/specdec-not-writable"], "--out"),      # used to fail only after the whole run
    (["--gammas", "1,1"], "--gammas"),
    (["--gammas", "100"], "--gammas"),
    (["--top-p", "2"], "--top-p"),                            # used to be ignored when every temperature is 0
    (["--temperatures", "0,inf"], "--temperatures"),
    (["--max-k", "1000"], "--max-k"),
    (["--new-tokens", "600"], "--new-tokens"),
    (["--drafter", "none"], "--drafter"),
])
def test_validate_usage_errors(capsys, target, args, option) -> None:
    argv = ["validate", "--target", str(target), "--temperatures", "0", *args]
    if "--drafter" not in args:
        argv += ["--drafter", "lookup"]
    expect_usage_error(capsys, argv, option)


@pytest.mark.parametrize("args, option", [
    (["--max-gamma", "100000000"], "--max-gamma"),          # used to hang (10^7: 23 s, 3.9 GB)
    (["--gamma", "1000000"], "--gamma"),                     # used to print a million-row table
    (["--verify-cost", "1,0.5"], "--verify-cost"),           # used to plan 3.27x from 1.8 tokens per iteration
    (["--c", "1e308"], "--c"),                               # used to print overflow warnings and Infinity
    (["--c", "nan"], "--c"),
])
def test_plan_usage_errors(capsys, args, option) -> None:
    expect_usage_error(capsys, ["plan", "--alpha", "0.8", "--c", "0.05", *args], option)


def test_figures_out_checked_first(capsys) -> None:
    expect_usage_error(capsys, ["figures", "--out", "/proc/specdec-not-writable"], "--out")


def test_estimate_flags_disturbed_timings(capsys, target, tmp_path, monkeypatch) -> None:
    """Other processes busy during the timings (simulated: the monitor reports 0.5 cores): the
    timings are redone, and the result says they were disturbed instead of printing an
    inflated v(k) silently."""
    import specdec.reference.measure.interference as interference

    monkeypatch.setattr(interference.CpuMonitor, "stop", lambda self: 0.5)
    monkeypatch.setattr(interference.time, "sleep", lambda seconds: None)
    path = tmp_path / "prompts.txt"
    path.write_text("w1 w2 w3 w1 w2\nw4 w5 w4 w5\n")
    code, out, _ = run(capsys, ["estimate", "--target", str(target), "--drafter", "lookup", "--prompts-file",
                                str(path), "--tokens", "16", "--new-tokens", "8", "--max-k", "3",
                                "--timing-repeats", "1", "--target-backend", "eager", "--json"])
    d = strict_json(out)
    assert code == 0 and d["timing_interference"] == {"threshold_cores": 0.1, "load_cores": 0.5, "attempts": 4,
                                                      "disturbed": True}
    assert any("busy during the timings" in w for w in d["warnings"])


def test_config_only_target_folder(capsys, tmp_path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    line = expect_usage_error(capsys, ["decode", "--prompt", PROMPT, "--target", str(folder)], "--target")
    assert "no tokenizer files" in line and "no weights" in line


@pytest.mark.parametrize("argv, option", [
    (["estimate", "--drafter", "lookup", "--timing-repeats", "1000000000"], "--timing-repeats"),
    (["estimate", "--drafter", "lookup", "--bootstrap", "1000000000000"], "--bootstrap"),
    (["estimate", "--drafter", "lookup", "--tokens", "99999999999"], "--tokens"),
    (["validate", "--drafter", "lookup", "--alpha-tokens", "99999999999"], "--alpha-tokens"),
    (["validate", "--drafter", "lookup", "--repeats", "1000000"], "--repeats"),
    (["bild", "--drafter", "lookup", "--prompts", "1000000000"], "--prompts"),
])
def test_absurd_counts_are_refused_before_anything_runs(capsys, argv, option) -> None:
    """Bounded numeric options (issue 28): a runaway count is one line naming the option."""
    expect_usage_error(capsys, argv, option)


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_negative_rollback_is_a_usage_error(capsys, value) -> None:
    expect_usage_error(capsys, ["bild", "--drafter", "lookup", "--rollback", value], "--rollback")


@pytest.mark.parametrize("argv", [[], ["heads"]])
def test_bare_command_prints_its_help(capsys, argv) -> None:
    code, out, err = run(capsys, argv)
    assert code == 0 and out.startswith("Usage:") and len(out.splitlines()) > 5 and err == ""


@pytest.mark.parametrize("prompt, words", [("", "no tokens"), ("w1 " * 600, "more than the model's 512")])
def test_bad_prompt_is_refused_before_the_weights_load(capsys, tmp_path, prompt, words) -> None:
    """Corrupt weights would fail the load (exit 1): exit 2 on the prompt proves the check ran first."""
    folder = save_tiny_model(tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    capsys.readouterr()  # the save's own progress bar
    line = expect_usage_error(capsys, ["decode", "--prompt", prompt, "--target", str(folder)], "--prompt")
    assert words in line


@pytest.mark.parametrize("category", ["", " ", "code,,chat"])
def test_an_empty_category_name_is_refused(capsys, target, category) -> None:
    """`--category ''` used to mean "every category" and run the whole estimate."""
    expect_usage_error(capsys, ["estimate", "--target", str(target), "--drafter", "lookup",
                                "--category", category], "--category")


def test_plan_from_a_closed_standard_input_is_one_line(capsys, monkeypatch) -> None:
    """`plan --from -` with standard input closed (`<&-`) used to end in an AttributeError."""
    monkeypatch.setattr("sys.stdin", None)
    expect_usage_error(capsys, ["plan", "--from", "-", "--c", "0"], "--from")


@pytest.mark.parametrize("source, said", [("/dev/zero", "not a regular file"), ("{dir}", "not a regular file"),
                                         ("{dir}/missing.txt", "no such file")])
def test_plan_from_says_what_the_source_is(capsys, tmp_path, source, said) -> None:
    """`plan --from /dev/zero` was refused as "no such file": it names what the path is."""
    code, out, err = run(capsys, ["plan", "--from", source.format(dir=tmp_path), "--c", "0"])
    assert code == 2 and out == "" and err.strip().count("\n") == 0 and said in err, err


@pytest.mark.parametrize("cache", ["/dev/null", "/dev/null/below", "{file}", "{file}/below"])
def test_a_cache_that_cannot_be_a_folder_is_refused_first(capsys, monkeypatch, tmp_path, target, cache) -> None:
    """SPECDEC_CACHE naming a file or a path below one: one line naming it, status 2, before any
    command runs (it used to be "[Errno 20] Not a directory" with status 1 after loading)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SPECDEC_CACHE", cache.format(file=blocker))
    code, out, err = run(capsys, ["decode", "--target", str(target), "--prompt", PROMPT, "--new-tokens", "2"])
    assert code == 2 and out == "" and err.strip().count("\n") == 0 and "SPECDEC_CACHE" in err, err


def test_plan_refuses_a_draft_length_of_zero(capsys, tmp_path) -> None:
    """`plan --from <counts without a length> --draft-length 0` used to warn (0 / 0) and plan."""
    from pathlib import Path

    log = Path(__file__).parent / "fixtures" / "engines" / "llama_timings.jsonl"  # timings: no draft length
    expect_usage_error(capsys, ["plan", "--from", str(log), "--c", "0", "--draft-length", "0"], "--draft-length")


@pytest.mark.parametrize("options, words", [
    ("k=8,p=1000", "1 .. 256"),          # more paths than are ever verified together
    ("k=1,p=2", "top-1 lattice"),         # a lattice of single candidates has one path
    ("k=-1", "1 .. 1024"), ("p=0", "1 .. 256"), ("k=1_000", "1 .. 1024"), ("p=" + "9" * 100_000, "100000 characters"),
    ("k=4,k=8", "twice"), ("w=0.3", "weights a rescorer"), ("w=1e999", "finite"),
])
def test_heads_options_are_refused_before_the_folder_is_looked_at(capsys, target, options, words) -> None:
    """The grammar's bounds and contradictions come first: the folder does not even exist."""
    line = expect_usage_error(capsys, ["decode", "--prompt", PROMPT, "--target", str(target),
                                       "--drafter", f"heads:/nonexistent/heads,{options}"], "--drafter")
    assert words in line and "heads.safetensors" not in line and len(line) < 400, line


def test_heads_paths_beyond_the_lattice_are_refused_before_loading(capsys, target, tmp_path) -> None:
    """p above the k^H paths of the card's heads: one line from the card alone (the weights file
    here is not even safetensors, so anything that loaded it would fail otherwise)."""
    import json

    (tmp_path / "card.json").write_text(json.dumps({"format": "specdec-heads/1", "n_heads": 3, "vocab": 8192}))
    (tmp_path / "heads.safetensors").write_bytes(b"not loaded")
    line = expect_usage_error(capsys, ["decode", "--prompt", PROMPT, "--target", str(target),
                                       "--drafter", f"heads:{tmp_path},k=2,p=16"], "--drafter")
    assert "2^3 = 8" in line and "p=16" in line
    (tmp_path / "card.json").write_text(json.dumps({"format": "specdec-heads/1", "n_heads": 10 ** 9, "vocab": 8192}))
    line = expect_usage_error(capsys, ["decode", "--prompt", PROMPT, "--target", str(target),
                                       "--drafter", f"heads:{tmp_path},k=2,p=16"], "--drafter")
    assert "not a heads card" in line and len(line) < 400


def test_a_sigterm_that_lands_in_a_finalizer_is_not_lost() -> None:
    """Python prints and drops an exception raised inside `__del__` or a weakref callback: a SIGTERM
    arriving there (seen once in a regex object's finalizer) must still end the command, so the
    command's unraisable hook sends it again once the finalizer has returned, and Terminated is
    raised where the command is."""
    import gc
    import signal
    import time
    import weakref

    from specdec.cli import _terminate, _unraisable
    from specdec.errors import Terminated

    class Finalized:
        def __del__(self) -> None:
            _terminate(signal.SIGTERM, None)  # as if the signal arrived here

    class Referent:
        pass

    previous, hook = signal.signal(signal.SIGTERM, _terminate), sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    try:
        for finalizer in ("__del__", "weakref"):
            with pytest.raises(Terminated):
                if finalizer == "__del__":
                    Finalized()
                else:
                    referent = Referent()
                    keep = weakref.ref(referent, lambda ref: _terminate(signal.SIGTERM, None))  # noqa: F841
                    del referent
                gc.collect()
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    time.sleep(0.01)
    finally:
        sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, previous)
