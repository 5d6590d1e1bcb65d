"""Issue 28's representative hostile inputs (benchmarks/bench_hostile.py), each a real process
under a 1 GiB address-space limit: one `Error:` line, exit 2, no traceback, no hang (the 2 s
budget is the benchmark's; the slow-drip URL is tested here in process with a short deadline
instead of its 10 s); and the pieces behind them: outputs published all or nothing, URLs with
one deadline and a size cap, aggregate-only vLLM counters planned with the i.i.d. model and
said so, long prompts cut before tokenizing."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from benchmarks.bench_hostile import cases, outputs_kept, passes, run_case, serve, signal_cases
from specdec.engines import metrics
from specdec.errors import SpecdecError
from specdec.paths import publish, publishing
from tests.cli_helpers import run_main

HANG_S = 10.0  # here a hang guard; the 2 s budget is benchmarks/bench_hostile.py's, timed on a quiet machine


def test_every_representative_case_is_one_line_under_the_limits(tmp_path) -> None:
    failures = []
    for label, argv, allowed in cases(tmp_path):
        if "a byte every 2 s" in label:
            continue
        code, seconds, rss, stderr = run_case(argv)
        if not passes(code, seconds, rss, stderr, max(allowed, HANG_S)):
            failures.append((label, code, round(seconds, 2), round(rss), stderr[-300:]))
    for label, argv, signum in signal_cases(tmp_path):
        code, seconds, rss, stderr = run_case(argv, signum=signum)
        if not passes(code, seconds, rss, stderr, HANG_S, signum):
            failures.append((label, code, round(seconds, 2), round(rss), stderr[-300:]))
    assert not failures, failures
    assert (tmp_path / "out" / "validation.md").read_text() == "old results\n"  # validate refused, nothing replaced
    assert outputs_kept(tmp_path) and not (tmp_path / "F").exists()  # outputs never replaced; no quote broke out


def test_publish_is_all_or_nothing(tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.json").write_text("old a")
    (out / "b.md").mkdir()  # a folder where a file goes: nothing moves
    with pytest.raises(IsADirectoryError):
        with publishing(out) as work:
            (work / "a.json").write_text("new a")
            (work / "b.md").write_text("new b")
    assert (out / "a.json").read_text() == "old a" and sorted(p.name for p in out.iterdir()) == ["a.json", "b.md"]
    (out / "b.md").rmdir()
    (out / "b.md").write_text("old b")
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.json").write_text("new a")
    (work / "b.md").write_text("new b")
    real_replace = os.replace

    def failing_replace(src, dst):  # the second new file fails to land
        if Path(src) == work / "b.md":
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        publish({work / "a.json": out / "a.json", work / "b.md": out / "b.md"})
    monkeypatch.undo()
    assert (out / "a.json").read_text() == "old a" and (out / "b.md").read_text() == "old b"
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.md"]  # no .old- files left


@pytest.fixture()
def server():
    http_port, _ = serve(drip_s=0.5)
    return f"http://127.0.0.1:{http_port}"


def test_url_has_one_deadline_and_a_size_cap(server, monkeypatch) -> None:
    monkeypatch.setattr(metrics, "FETCH_DEADLINE_S", 1.0)
    start = time.perf_counter()
    with pytest.raises(SpecdecError, match="no complete answer within 1 s"):
        metrics.read_source(server + "/drip")  # each read returns in 0.5 s: a per-read timeout never fires
    assert time.perf_counter() - start < 2.0
    monkeypatch.setattr(metrics, "MAX_URL_BYTES", 10_000)  # /big sends 1 GiB
    with pytest.raises(SpecdecError, match="exceeds"):
        metrics.read_source(server + "/big")
    assert metrics.read_source(server + "/small").startswith("vllm:spec_decode_num_drafts 1")


def test_aggregate_only_vllm_counters_are_planned_iid_and_flagged(capsys, tmp_path) -> None:
    page = tmp_path / "metrics.txt"
    page.write_text("vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_draft_tokens_total 300\n"
                    "vllm:spec_decode_num_accepted_tokens_total 150\n")
    code, out, _ = run_main(capsys, ["plan", "--from", str(page), "--c", "0.05"])
    assert code == 0 and "i.i.d. alpha from 150/300" in out and "no per-position counters" in out
    assert "num_speculative_tokens\": 3" in out  # k = 300 / 100 draft tokens per draft


def test_over_long_prompt_is_cut_before_tokenizing(capsys) -> None:
    """truncate=left on a prompt far past the character bound: the tail kept is tokenized, and the
    ids are those of the whole prompt's end."""
    from transformers import AutoTokenizer

    from specdec.reference.data.default_model import default_target_path
    from specdec.reference.data.prompt_sources import Prompt
    from specdec.reference.data.prompts import encode_prompt, longest_token

    tokenizer = AutoTokenizer.from_pretrained(default_target_path())
    words = " ".join(f"w{i % 997}" for i in range(200_000))
    assert len(words) > 4 * longest_token(tokenizer) * (32 + 64)
    prompt = Prompt(words, "file", "long:1", False)
    ids, cut = encode_prompt(tokenizer, prompt, "none", 32, "left")
    full = tokenizer(words[-20_000:], add_special_tokens=False)["input_ids"]
    assert cut and len(ids) <= 32 and ids[-20:] == full[-20:]
    with pytest.raises(SpecdecError, match="characters, more than --max-prompt-tokens 32"):
        encode_prompt(tokenizer, prompt, "none", 32, "refuse")


def test_engine_advice_is_shell_safe(capsys, tmp_path) -> None:
    """A --method outside vLLM's names is refused (one line, exit 2); a printed flag line
    round-trips through shlex.split to the JSON it was built from (issue 53)."""
    import json
    import shlex

    counts = tmp_path / "m.txt"
    counts.write_text("vllm:spec_decode_num_drafts 100\nvllm:spec_decode_num_draft_tokens 300\n"
                      "vllm:spec_decode_num_accepted_tokens 150\n")
    code, out, err = run_main(capsys, ["plan", "--from", str(counts), "--c", "0", "--method",
                                       "x' ; touch F ; echo '"])
    assert code == 2 and "--method" in err and len(err.strip().splitlines()) == 1 and "vLLM" in err
    assert not (tmp_path / "F").exists()
    code, out, err = run_main(capsys, ["plan", "--from", str(counts), "--c", "0", "--method", "eagle3"])
    line = next(x for x in out.splitlines() if x.startswith("vLLM: "))[len("vLLM: "):]
    flag, value = shlex.split(line)
    assert flag == "--speculative-config" and json.loads(value)["method"] == "eagle3"
