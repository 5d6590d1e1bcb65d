"""llama.cpp's real output read into counts: tests/fixtures/llamacpp/ holds a real llama-server's
/metrics pages, /completion and /v1/chat/completions responses and log lines (captured by
capture.py there: the vendored llama.cpp 0c1e570 of llama-cpp-python 0.3.36, the default
target's Q4_1 GGUF, ngram-simple and ngram-mod at temperature 0; build.json records the build).

- The /metrics page parses per position; its counts agree with the responses' timings and
  the log's line, and `plan --from` plans from it without --draft-length.
- The log's "mean len" gives the engine's verify steps, so its mean draft length is k.
- A response with nothing drafted is a zero-draft record, not an error, alone or among others.
- The implementation's 'statistics' lines (trace verbosity) state the draft count: alone, or
  beside per-request lines that do not (older builds), they give the draft length.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.metrics import read_counts
from tests.cli_helpers import run_main, strict_json

FIXTURES = Path(__file__).parent / "fixtures" / "llamacpp"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def timings(name: str) -> dict:
    return json.loads(text(name))["timings"]


@pytest.mark.parametrize("kind", ["ngram_simple", "ngram_mod"])
def test_metrics_page_matches_the_responses(kind) -> None:
    counts = read_counts(text(f"metrics_{kind}.txt"))
    chat = timings(f"chat_{kind}.json")  # the only request of the three that drafted
    assert counts.source == "llamacpp-prometheus" and counts.engine == "llamacpp" and counts.per_position
    assert (counts.draft_tokens, counts.accepted_tokens) == (chat["draft_n"], chat["draft_n_accepted"])
    assert sum(counts.accepted) == counts.accepted_tokens and counts.reached[0] == counts.drafts
    assert "draft_n" not in timings(f"completion_{kind}.json") and "draft_n" not in timings(f"completion_short_{kind}.json")
    log = read_counts(text(f"server_{kind}.log"))  # "draft acceptance = r (a accepted / g generated), mean len = L"
    assert (log.source, log.accepted_tokens, log.draft_tokens, log.drafts) == (
        "llamacpp-server", counts.accepted_tokens, counts.draft_tokens, counts.drafts)
    assert log.k == round(counts.draft_tokens / counts.drafts) and "mean draft length" in log.note


def test_ngram_simple_numbers() -> None:
    """The captured ngram-simple run: 2 drafts of 48 tokens (its default size_m), 41 accepted; the
    first draft accepted 6 tokens, the second 35; positions past 35 were reached by no draft."""
    counts = read_counts(text("metrics_ngram_simple.txt"))
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens, counts.k) == (2, 96, 41, 48)
    assert counts.reached[:8] == [2, 2, 2, 2, 2, 2, 2, 1] and counts.accepted[5:8] == [2, 1, 1]
    acc = acceptance_from_counts(counts)
    assert acc.k_observed == 36 and acc.alphas[6] == 0.5 and acc.alphas[35] == 0.0
    log = acceptance_from_counts(read_counts(text("server_ngram_simple.log")))
    assert log.k_observed == 48 and "41/96" in log.model and 0.95 < log.alphas[0] < 0.97  # sum_{i<=48} a^i = 20.5
    mod = read_counts(text("metrics_ngram_mod.txt"))  # one draft of 50 tokens of at most 64: a short draft
    assert (mod.drafts, mod.draft_tokens, mod.accepted_tokens, mod.k) == (1, 50, 23, 64) and "biased low" in mod.note
    # tokens_predicted_total 145 with 41 accepted: 104 target steps (one a request too many), 2 drafted
    assert counts.steps == 104 and counts.draft_share == 2 / 104


def test_plan_reads_the_real_page_and_log_without_draft_length(capsys) -> None:
    for name in ("metrics_ngram_simple.txt", "server_ngram_simple.log"):
        code, out, _ = run_main(capsys, ["plan", "--from", str(FIXTURES / name), "--c", "0", "--json"])
        r = strict_json(out)
        assert code == 0 and r["engine_config"]["engine"] == "llamacpp"
        assert r["engine_config"]["flags"].startswith("--spec-draft-n-max")
    code, _, err = run_main(capsys, ["plan", "--from", str(FIXTURES / "server_ngram_simple.log"), "--c", "0",
                                     "--draft-length", "6"])
    assert code == 2 and "states draft length 48, not 6" in err and len(err.strip().splitlines()) == 1


def test_responses_with_and_without_drafts(capsys, tmp_path) -> None:
    chat = read_counts(text("chat_ngram_simple.json"))
    assert (chat.source, chat.draft_tokens, chat.accepted_tokens, chat.k) == ("llamacpp-server-json", 96, 41, None)
    for name in ("completion_short_ngram_simple.json", "completion_no_speculation.json"):
        none = read_counts(text(name))  # a valid record: nothing was drafted
        assert (none.source, none.draft_tokens, none.accepted_tokens) == ("llamacpp-server-json", 0, 0)
        assert "none of the 1 responses drafted" in none.note
    mixed = tmp_path / "responses.jsonl"
    mixed.write_text("".join(text(n) for n in ("completion_ngram_simple.json", "chat_ngram_simple.json",
                                                "completion_short_ngram_simple.json")))
    both = read_counts(mixed.read_text())
    assert (both.draft_tokens, both.accepted_tokens) == (96, 41) and "2 of the 3 responses drafted nothing" in both.note
    code, out, _ = run_main(capsys, ["plan", "--from", str(mixed), "--c", "0", "--draft-length", "48", "--json"])
    assert code == 0 and strict_json(out)["acceptance"]["counts"] == {"accepted_tokens": 41, "draft_tokens": 96,
                                                                      "k": 48}
    code, _, err = run_main(capsys, ["plan", "--from", str(mixed), "--c", "0"])  # the timings count no drafts
    assert code == 2 and "--draft-length" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_main(capsys, ["plan", "--from", str(FIXTURES / "completion_no_speculation.json"), "--c", "0"])
    assert code == 2 and "no drafted tokens" in err and "none of the 1 responses drafted" in err


@pytest.mark.parametrize("page, message", [
    ("llamacpp:spec_decode_num_draft_tokens_total 3\n", "no llamacpp:spec_decode_num_drafts counter"),
    ("llamacpp:spec_decode_num_drafts_total 1\nllamacpp:spec_decode_num_draft_tokens_total 3\n"
     "llamacpp:spec_decode_num_accepted_tokens_total 4\n", "impossible"),
    ("llamacpp:spec_decode_num_drafts_total 0\nllamacpp:spec_decode_num_draft_tokens_total 0\n"
     "llamacpp:spec_decode_num_accepted_tokens_total 0\n", "verified no draft yet"),
    ("llamacpp:spec_decode_num_drafts_total 2\nllamacpp:spec_decode_num_draft_tokens_total 8\n"
     "llamacpp:spec_decode_num_accepted_tokens_total 3\n"
     'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 1\n'
     'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 2\n', "must not grow"),
])
def test_malformed_pages_are_one_line_errors(page, message) -> None:
    with pytest.raises(ValueError, match=message):
        acceptance_from_counts(read_counts(page))


def test_a_page_without_per_position_counters_takes_the_mean_draft_length() -> None:
    page = "\n".join(line for line in text("metrics_ngram_simple.txt").splitlines() if "per_pos" not in line)
    counts = read_counts(page)
    assert (counts.per_position, counts.k, counts.drafts) == (False, 48, 2) and "older llama-server" in counts.note


def test_the_statistics_lines_state_the_draft_length(capsys, tmp_path) -> None:
    """server_statistics.log: the real server at trace verbosity (capture.py statistics): per request
    a 'draft acceptance' line with its mean len and 'acc per pos', after it the implementation's
    running 'statistics' line. Each source states the draft count, so `plan --from` never asks for
    --draft-length: the statistics lines alone (per position, 2 drafts, 41 of 96 accepted), and, as
    older builds print them (no 'mean len', no rates), the per-request totals with k = #gen tokens /
    #gen drafts = 96 / 2 from the statistics line."""
    log = text("server_statistics.log")
    stats = "\n".join(line for line in log.splitlines() if "statistics" in line)
    counts = read_counts(stats)
    assert counts.source == "llamacpp-statistics (ngram-simple)" and counts.per_position
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == (2, 96, 41)
    assert counts.reached[:8] == [2, 2, 2, 2, 2, 2, 2, 1]  # the same counts the /metrics page gives
    old = "\n".join(re.sub(r", #mean acc len.*?\)", "", line).replace(", mean len = 21.50", "")
                    for line in log.splitlines() if "acc per pos" not in line)
    assert "mean len" not in old and "rate/pos" not in old
    counts = read_counts(old)
    assert (counts.source, counts.draft_tokens, counts.accepted_tokens, counts.k) == ("llamacpp-server", 96, 41, 48)
    assert "96 draft tokens / 2 drafts" in counts.note
    for name, body in (("stats.log", stats), ("old.log", old)):
        (tmp_path / name).write_text(body + "\n")
        code, out, err = run_main(capsys, ["plan", "--from", str(tmp_path / name), "--c", "0", "--json"])
        assert code == 0 and strict_json(out)["engine_config"]["engine"] == "llamacpp", err
    code, _, err = run_main(capsys, ["plan", "--from", str(tmp_path / "old.log"), "--c", "0", "--draft-length", "6"])
    assert code == 2 and "48" in err and len(err.strip().splitlines()) == 1, err
