"""Engines, round two: SGLang, vLLM's per-request statistics and llama.cpp's newer outputs
(specdec.engines.sglang / .vllm / .llamacpp), and SGLang's configuration out.

- Every format parses from a fixture (tests/fixtures/engines; formats and their sources in
  docs/engines.md) into the counts computed here by hand.
- Round trips: drafts drawn by the project's Monte Carlo simulator for known alpha_i, written in
  SGLang's and llama.cpp's formats, parse back to alpha_i inside their 95% intervals and to the
  optimal gamma of the true alpha_i where the format carries per-position counts; where it
  carries only totals or means, the i.i.d. alpha is recovered for i.i.d. drafts and the report
  says that it is a model (and, for means, that there is no interval).
- `plan --from` prints the configuration of the engine the counts came from.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.metrics import read_counts
from specdec.simulator.montecarlo import simulate_per_position
from specdec.simulator.positional import positional_optimal_gamma
from tests.cli_helpers import run_main, strict_json
from tests.test_engines import FIXTURES, fixture, plan_from

ALPHAS, C, K, N = np.array([0.85, 0.7, 0.6, 0.5, 0.45, 0.4]), 0.1, 6, 20_000


def drawn(alphas=ALPHAS, n: int = N, seed: int = 7) -> np.ndarray:
    """Accepted drafts per verify step (0..K), the Monte Carlo of Algorithm 1's acceptances."""
    return simulate_per_position(alphas, K, n, np.random.default_rng(seed))


def assert_recovers(result: dict, alphas=ALPHAS) -> None:
    for a, (lo, hi) in zip(alphas, result["acceptance"]["alpha_per_position_ci"]):
        assert lo <= a <= hi
    truth = positional_optimal_gamma(alphas, C, max_gamma=K)
    assert result["plan"]["optimal_gamma"] == int(truth.gamma) == 3


def test_sglang_request_meta_info() -> None:
    counts = read_counts(fixture("sglang_generate.jsonl"))  # two current requests, one with the older key names
    # hist [0,2,1,1] (k=3), [3,2,0,1] (k=3), [2,2] padded to k=3: at least 1/2/3 accepted, per step
    assert counts.source == "sglang-request" and counts.k == 3 and counts.drafts == 14
    assert counts.reached == [14, 9, 3] and counts.accepted == [9, 3, 2]
    assert (counts.accepted_tokens, counts.draft_tokens) == (14, 42)
    openai = read_counts(fixture("sglang_openai.json"))  # sglext.spec_tokens_details
    assert openai.reached == [4, 4, 2] and openai.accepted == [4, 2, 1] and openai.engine == "sglang"


def test_sglang_gauges_and_log_are_means_without_intervals() -> None:
    gauges = read_counts(fixture("sglang_metrics.txt"))
    assert gauges.k == 3 and gauges.mean_accepted == pytest.approx(1.75) and not gauges.per_position
    acc = acceptance_from_counts(gauges)
    assert 1 + sum(acc.alphas[0] ** i for i in range(1, 4)) == pytest.approx(2.75, abs=1e-9)
    assert acc.intervals == (None,) and "means over its log intervals" in acc.model
    with pytest.raises(ValueError, match="leave out --draft-length"):  # the source says k = 3
        acceptance_from_counts(gauges, k=5)
    log = read_counts(fixture("sglang_decode.log"))
    assert log.windows == 3 and log.mean_accepted == pytest.approx((1.75 + 1.55 + 1.65) / 3) and log.k is None
    with pytest.raises(ValueError, match="draft length"):
        acceptance_from_counts(log)
    with pytest.raises(ValueError, match="exceed the draft length 1"):
        acceptance_from_counts(log, k=1)
    text = plan_from(fixture("sglang_decode.log"), 0.0, draft_length=3)
    assert text["acceptance"]["alpha_per_position_ci"] == [None]


def test_vllm_per_request_summary_and_detailed() -> None:
    summary = read_counts(fixture("vllm_request_summary.json"))  # the PR's example: [39, 1, 0, 3]
    assert summary.reached == [43, 4, 3] and summary.accepted == [4, 3, 3] and summary.note is None
    detailed = read_counts(fixture("vllm_request_detailed.jsonl"))  # per step: exact for short drafts; null skipped
    # steps (accepted/drafted): 3/3 0/3 1/3 3/3 2/3 and 0/1 1/2 2/3
    assert detailed.reached == [8, 6, 4] and detailed.accepted == [6, 4, 2] and detailed.k == 3
    short = json.loads(fixture("vllm_request_summary.json"))
    short["metrics"]["speculative_decoding"]["num_draft_tokens"] = 100  # drafts shorter than 3: flagged
    assert "biased low" in read_counts(json.dumps(short)).note
    short["metrics"]["speculative_decoding"]["num_spec_steps"] = 44
    with pytest.raises(ValueError, match="num_spec_steps = 44"):
        read_counts(json.dumps(short))


def test_vllm_v1_log_in_both_field_orders() -> None:
    new = ("INFO 08-22 10:15:30 [metrics.py:112] SpecDecoding metrics: Mean acceptance length: 1.23, Accepted "
           "throughput: 1.00 tokens/s, Drafted throughput: 12.90 tokens/s, Accepted: 10 tokens, Drafted: 129 tokens, "
           "Per-position acceptance rate: 0.093, 0.070, 0.070, Avg Draft acceptance rate: 7.8%\n")
    counts = read_counts(new)
    assert counts.drafts == 43 and counts.reached == [43, 4, 3] and counts.accepted == [4, 3, 3]
    old = "INFO 04-01 10:15:30 [metrics.py:80] SpecDecoding metrics: Draft acceptance rate: 7.8%, Accepted: 10 tokens, " \
          "Drafted: 129 tokens\n"
    assert (read_counts(old).accepted_tokens, read_counts(old).draft_tokens) == (10, 129)


def test_llamacpp_statistics_server_rates_and_timings() -> None:
    stats = read_counts(fixture("llama_statistics.log"))  # 87 drafts; at least 1/2/3 accepted: 70, 55, 42
    assert stats.reached == [87, 70, 55] and stats.accepted == [70, 55, 42] and stats.engine == "llamacpp"
    assert stats.accepted_tokens == 167 == sum(stats.accepted)
    rates = read_counts(fixture("llama_server_rates.log"))  # the per-request line wins: 167 / (0.805+0.632+0.483) = 87
    assert rates.source == "llamacpp-server" and rates.reached == [87, 70, 55]
    old = read_counts(fixture("llama_statistics_old.log"))  # per-request line without rates: aggregate,
    assert (old.accepted_tokens, old.draft_tokens, old.per_position) == (3610, 4077, False)
    assert old.k == 2 and "4973 draft tokens / 2060 drafts" in old.note  # its length from the statistics line
    only_stats = "\n".join(line for line in fixture("llama_statistics_old.log").splitlines() if "statistics" in line)
    assert (read_counts(only_stats).accepted_tokens, read_counts(only_stats).draft_tokens) == (4367, 4973)
    timings = read_counts(fixture("llama_timings.jsonl"))  # the response without drafts has no draft_n: skipped
    assert (timings.accepted_tokens, timings.draft_tokens, timings.k) == (200, 319, None)


def sglang_requests(accepted: np.ndarray, requests: int = 40, histogram: bool = True) -> str:
    lines = []
    for part in np.array_split(accepted, requests):
        info = {"spec_verify_ct": int(part.size), "spec_num_correct_drafts": int(part.sum()),
                "spec_num_proposed_drafts": int(part.size * K)}
        if histogram:
            hist = np.bincount(part)
            info["spec_correct_drafts_histogram"] = hist.tolist()  # ragged, as SGLang sends it
        lines.append(json.dumps({"text": "...", "meta_info": info}))
    return "\n".join(lines) + "\n"


def test_round_trip_through_sglang_formats() -> None:
    accepted = drawn()
    assert_recovers(plan_from(sglang_requests(accepted), C))
    iid = drawn(np.full(K, 0.7), seed=3)  # totals and means carry only an i.i.d. alpha: right for i.i.d. drafts
    totals = plan_from(sglang_requests(iid, histogram=False), C)
    assert totals["acceptance"]["alpha_per_position"][0] == pytest.approx(0.7, abs=0.01)
    assert "i.i.d." in totals["acceptance"]["model"]
    gauge = f'sglang:spec_accept_length{{model_name="m",tp_rank="0"}} {1 + iid.mean()}\n' \
            f'sglang:spec_num_steps{{model_name="m",tp_rank="0"}} {K}\n'
    mean = plan_from(gauge, C)
    assert mean["acceptance"]["alpha_per_position"][0] == pytest.approx(0.7, abs=0.01)
    assert mean["acceptance"]["alpha_per_position_ci"] == [None]


def test_round_trip_through_llamacpp_formats() -> None:
    accepted = drawn()
    at_least = [(accepted >= i + 1).mean() for i in range(K)]
    line = (f"I statistics     draft-eagle3: #calls(b,g,a) =    1 {N} {N}, #gen drafts = {N}, #acc drafts = "
            f"{int((accepted > 0).sum())}, #gen tokens = {N * K}, #acc tokens = {int(accepted.sum())}, #mean acc len = "
            f"{1 + accepted.mean():.2f}, #acc rate/pos = ({', '.join(f'{r:.3f}' for r in at_least)}), dur(b,g,a) = "
            "0.005, 325.555, 0.114 ms\n")
    assert_recovers(plan_from(line, C))  # rates to 3 decimals: counts within half a draft per thousand
    server = f"draft acceptance = {accepted.mean() / K:.5f} ({int(accepted.sum())} accepted / {N * K} generated)\n"
    with pytest.raises(ValueError, match="draft length"):
        plan_from(server, C)
    assert "i.i.d." in plan_from(server, C, draft_length=K)["acceptance"]["model"]


def test_configurations_out(capsys) -> None:
    r = plan_from(fixture("vllm_metrics.txt"), 0.0, engine="sglang", method="eagle3")["engine_config"]
    assert r["flags"] == ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
                          "--speculative-num-draft-tokens 4 --speculative-draft-model-path <draft weights>")
    vllm = plan_from(fixture("vllm_metrics.txt"), 0.0, engine="vllm", method="eagle3")["engine_config"]
    assert vllm["speculative_config"] == {"method": "eagle3", "num_speculative_tokens": 3, "model": "<draft weights>"}
    llama = plan_from(fixture("vllm_metrics.txt"), 0.0, engine="llamacpp")["engine_config"]
    assert llama["flags"] == "--spec-draft-n-max 3 --spec-draft-n-min 1" and llama["flags_older"].startswith("--draft-max")
    # the engine defaults to the one the counts came from
    for name, engine, line in (("sglang_generate.jsonl", "sglang", "SGLang: --speculative-algorithm NGRAM"),
                               ("vllm_metrics.txt", "vllm", "vLLM: --speculative-config"),
                               ("llama_statistics.log", "llamacpp", "llama.cpp: --spec-draft-n-max")):
        code, out, _ = run_main(capsys, ["plan", "--from", str(FIXTURES / name), "--c", "0.05", "--json"])
        assert code == 0 and strict_json(out)["engine_config"]["engine"] == engine
        code, out, _ = run_main(capsys, ["plan", "--from", str(FIXTURES / name), "--c", "0.05"])
        assert line in out
    code, _, err = run_main(capsys, ["plan", "--from", str(FIXTURES / "sglang_generate.jsonl"), "--c", "0",
                                     "--method", "medusa"])
    assert code == 2 and "--method" in err and "no SGLang algorithm" in err


@pytest.mark.parametrize("text, message", [
    ('{"meta_info": {"spec_verify_ct": 4, "spec_num_correct_drafts": 7}}', "spec_num_proposed_drafts"),
    ('{"meta_info": {"spec_verify_ct": 4, "spec_num_correct_drafts": 7, "spec_num_proposed_drafts": 12, '
     '"spec_correct_drafts_histogram": [0, 3, 1]}}', "disagrees"),
    ('{"meta_info": {"spec_verify_ct": 4, "spec_num_correct_drafts": 13, "spec_num_proposed_drafts": 12}}', "impossible"),
    ("sglang:spec_accept_length{} 0.5\n", r"\[1, 1025\]"),
    ('{"timings": {"draft_n": 10, "draft_n_accepted": 12}}', "impossible"),
    ("I statistics ngram-mod: #calls(b,g,a) = 1 2 2, #gen drafts = 2, #acc drafts = 1, #gen tokens = 6, "
     "#acc tokens = 2\nI statistics draft-mtp: #calls(b,g,a) = 1 2 2, #gen drafts = 2, #acc drafts = 1, "
     "#gen tokens = 6, #acc tokens = 2\n", "several"),
    ("Speculative metrics: Number of speculative tokens: 1000000000, Number of draft tokens: 4, Number of emitted "
     "tokens: 5.\n", "draft length"),
    ('vllm:spec_decode_num_drafts_total 4\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position="99999999"} 1\n',
     "position label"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_malformed_new_formats_are_one_line_errors(text, message) -> None:
    with pytest.raises(ValueError, match=message):
        plan_from(text, 0.0)


def test_pathological_rates_are_refused_quickly() -> None:
    """A 100,000-digit rate followed by a letter: the rate patterns cannot backtrack (before they
    were made unambiguous, 20,000 digits took 8-11 s and 100,000 minutes)."""
    line = "SpecDecoding metrics: Accepted: 1 tokens, Drafted: 3 tokens, Per-position acceptance rate: " \
           + "1" * 100_000 + "x\n"
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        read_counts(line)
