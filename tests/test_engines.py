"""Engine metrics in, plans and engine configurations out (specdec.engines,
specdec.simulator.engine_plan, `specdec plan --from`).

- Every documented format parses from a fixture (tests/fixtures/engines, written in the
  formats quoted in docs/engines.md) into the counts computed here by hand.
- Round trip: per-position counts drawn by the project's Monte Carlo simulator for known alpha_i,
  written as vLLM /metrics text, parse back to alpha_i inside their 95% intervals and to the
  optimal gamma of the true alpha_i.
- specdec's own `decode --json` output (a real decode on a tiny model) parses to its counts.
- Malformed or partial input is a one-line error naming what is missing; nothing is planned.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.configs import engine_config
from specdec.engines.metrics import read_counts
from specdec.report import engine_plan_dict
from specdec.simulator.batch import BatchTimes
from specdec.simulator.counts import alpha_from_fraction, iid_fraction
from specdec.simulator.engine_plan import engine_plan
from specdec.simulator.montecarlo import simulate_per_position
from specdec.simulator.positional import positional_optimal_gamma
from tests.cli_helpers import run_main, strict_json

FIXTURES = Path(__file__).parent / "fixtures" / "engines"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def plan_from(text: str, c: float, draft_length: int | None = None, max_gamma: int | None = None,
              extrapolate: bool = False, batch_timing: dict | None = None, engine: str | None = None,
              method: str = "ngram") -> dict:
    """What `specdec plan --from` reports for an engine's output `text`, as its JSON values."""
    counts = read_counts(text)
    times = None if batch_timing is None else BatchTimes(
        tuple(batch_timing["batch_sizes"]), tuple(map(tuple, batch_timing["seconds"])), batch_timing.get("device"),
        batch_timing.get("context_tokens"))
    plan = engine_plan(acceptance_from_counts(counts, draft_length), c, counts.source, max_gamma, extrapolate,
                       batch_times=times)
    return engine_plan_dict(plan, None if engine is None else engine_config(plan, engine, method))


@pytest.mark.parametrize("name", ["vllm_metrics.txt", "vllm_v1.log"])
def test_vllm_per_position_sources(name) -> None:
    counts = read_counts(fixture(name))
    assert counts.accepted == [800, 600, 380] and counts.reached == [1000, 800, 600]
    assert counts.drafts == 1000 and counts.draft_tokens == 3000 and counts.accepted_tokens == 1780 and counts.k == 3
    acc = acceptance_from_counts(counts)
    np.testing.assert_allclose(acc.alphas, [0.8, 0.75, 380 / 600])
    assert all(lo < a < hi for a, (lo, hi) in zip(acc.alphas, acc.intervals))


def test_vllm_request_metrics_by_draft_length() -> None:
    counts = read_counts(fixture("vllm_request.jsonl"))
    assert counts.source == "vllm-request"
    assert counts.accepted == [80, 55, 35] and counts.reached == [120, 80, 55] and counts.drafts == 120


def test_aggregate_sources_and_the_iid_model() -> None:
    v0 = read_counts(fixture("vllm_v0.log"))  # the last line: running totals
    assert (v0.drafts, v0.k, v0.accepted_tokens, v0.draft_tokens) == (1000, 4, 1350, 4000)
    early = read_counts(fixture("vllm_v1_early.log"))
    assert (early.accepted_tokens, early.draft_tokens, early.per_position) == (1780, 3000, False)
    spec = read_counts(fixture("llama_speculative.txt"))
    assert (spec.k, spec.draft_tokens, spec.accepted_tokens) == (8, 480, 201)
    server = read_counts(fixture("llama_server.log"))
    assert (server.draft_tokens, server.accepted_tokens, server.k) == (130, 70, None)
    with pytest.raises(ValueError, match="draft length"):
        acceptance_from_counts(server)
    acc = acceptance_from_counts(server, k=4)
    assert iid_fraction(acc.alphas[0], 4) == pytest.approx(70 / 130, abs=1e-9)
    assert acc.intervals[0][0] < acc.alphas[0] < acc.intervals[0][1] and "i.i.d." in acc.model
    # the V0 system efficiency agrees: E(tokens per step) = 2350 / 1000 = sum_{i<=4} alpha^i + 1
    a = acceptance_from_counts(v0).alphas[0]
    assert 1 + sum(a ** i for i in range(1, 5)) == pytest.approx(2.35, abs=1e-9)
    for alpha in (0.0, 0.3, 0.9, 1.0):
        assert alpha_from_fraction(float(iid_fraction(alpha, 5)), 5) == pytest.approx(alpha, abs=1e-9)


def prometheus_text(drafts: int, at_least: list[int]) -> str:
    lines = ["# TYPE vllm:spec_decode_num_drafts_total counter",
             f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {float(drafts)}']
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{i}"}} {float(n)}'
              for i, n in enumerate(at_least)]
    return "\n".join(lines) + "\n"


def test_round_trip_from_the_monte_carlo_simulator() -> None:
    alphas, c, k = np.array([0.85, 0.7, 0.6, 0.5, 0.45, 0.4]), 0.1, 6
    accepted = simulate_per_position(alphas, k, 20_000, np.random.default_rng(7))
    at_least = [int((accepted >= i + 1).sum()) for i in range(k)]  # vLLM's per-position counters
    result = plan_from(prometheus_text(20_000, at_least), c)
    acc = result["acceptance"]
    for a, (lo, hi) in zip(alphas, acc["alpha_per_position_ci"]):
        assert lo <= a <= hi
    truth = positional_optimal_gamma(alphas, c, max_gamma=k)
    assert result["plan"]["optimal_gamma"] == int(truth.gamma) == 3
    assert result["plan"]["optimal_speedup"] == pytest.approx(float(truth.walltime_improvement), rel=0.02)


def test_specdec_decode_output_parses(tmp_path) -> None:
    from specdec.reference.core.loop import speculative_decode
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
    from tests.tiny_models import tiny_llama

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    r = speculative_decode(TargetScorer(target), PromptLookupDrafter(), [1, 2, 3, 1, 2, 3, 1, 2], 40, 3,
                           SamplingConfig(0.0), None)
    counts = read_counts(json.dumps({"stats": r.stats.to_dict()}))
    assert counts.source == "specdec-decode"
    n = len(counts.reached)
    assert counts.accepted == r.stats.accepted[:n] and counts.reached == r.stats.reached[:n]
    np.testing.assert_allclose(acceptance_from_counts(counts).alphas, r.stats.alpha_per_position()[:n])


def test_batch_plan_and_engine_configs() -> None:
    batch = {"batch_sizes": [1, 8, 16], "device": "cpu", "context_tokens": 128,
             "seconds": [[0.010, 0.0105, 0.011, 0.0115], [0.012, 0.018, 0.024, 0.030], [0.02, 0.04, 0.06, 0.08]]}
    r = plan_from(fixture("vllm_metrics.txt"), 0.0, batch_timing=batch, engine="vllm")
    ranges = r["batch"]["ranges"]
    assert ranges[0][0] == 1 and ranges[0][2] == 3 and ranges[-1][1] == 16 and ranges[-1][2] == 0
    cfg = r["engine_config"]["speculative_config"]
    assert cfg == {"method": "ngram", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": ranges}
    llama = plan_from(fixture("vllm_metrics.txt"), 0.0, engine="llamacpp")["engine_config"]
    assert llama["flags"] == "--spec-draft-n-max 3 --spec-draft-n-min 1"
    hf = plan_from(fixture("vllm_metrics.txt"), 0.0, engine="hf", method="draft_model")["engine_config"]
    assert hf["generate_kwargs"] == {"num_assistant_tokens": 3, "num_assistant_tokens_schedule": "constant"}
    off = plan_from(fixture("vllm_metrics.txt"), 5.0, engine="vllm")["engine_config"]
    assert off["speculate"] is False


def test_extrapolation_is_flagged() -> None:
    r = plan_from(fixture("vllm_metrics.txt"), 0.0, max_gamma=6, extrapolate=True)
    assert r["extrapolated"] and [row["extrapolated"] for row in r["plan"]["table"]] == [False] * 4 + [True] * 3
    assert len(plan_from(fixture("vllm_metrics.txt"), 0.0)["plan"]["table"]) == 4  # no extrapolation by default


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ('vllm:spec_decode_num_drafts_total{engine="0"} many\n', "must be a number"),
    ("hello world\n", "unrecognised"),
    ('vllm:spec_decode_num_drafts_total{engine="0"} 10.0\n', "per_pos"),
    ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 3.0\n', "num_drafts"),
    (prometheus_text(10, [5, 7]), "position 1"),
    (prometheus_text(10, [5, 3]).replace('position="1"', 'position="2"'), "skip a position"),
    ("INFO SpecDecoding metrics: Mean acceptance length: 2.0, Drafted: 30 tokens\n", "Accepted"),
    ("Speculative metrics: Draft acceptance rate: 0.5, Number of speculative tokens: 4\n", "Number of draft tokens"),
    ("n_draft   = 8\nn_predict = 10\n", "n_drafted"),
    ('{"stats": {"gamma": 3}}', "stats.reached"),
    ('{"metrics": {"speculative_decoding": {"acceptance_histogram": [1, 2]}}}\n{broken', "line 2"),
])
def test_malformed_input_is_one_line_error(text, message) -> None:
    with pytest.raises(ValueError, match=message):
        plan_from(text, 0.0)


def test_cli_from_file_stdin_and_errors(capsys, tmp_path, monkeypatch) -> None:
    path = FIXTURES / "vllm_metrics.txt"
    code, out, _ = run_main(capsys, ["plan", "--from", str(path), "--c", "0", "--engine", "vllm", "--json"])
    assert code == 0
    r = strict_json(out)
    assert r["plan"]["optimal_gamma"] == 3 and r["engine_config"]["speculative_config"]["num_speculative_tokens"] == 3
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO(fixture("llama_speculative.txt")))
    code, out, _ = run_main(capsys, ["plan", "--from", "-", "--c", "0.02", "--engine", "llamacpp"])
    assert code == 0 and "--draft-max" in out and "i.i.d." in out
    cost = tmp_path / "cost.json"
    cost.write_text(json.dumps({"batch_timing": {"batch_sizes": [1, 4], "seconds": [[0.01, 0.011, 0.012, 0.013],
                                                                                   [0.012, 0.02, 0.03, 0.04]],
                                                 "device": "cpu", "context_tokens": 128}}))
    fig = tmp_path / "batch.png"
    code, out, _ = run_main(capsys, ["plan", "--from", str(path), "--c", "0", "--batch-cost-file", str(cost),
                                     "--engine", "vllm", "--figure", str(fig)])
    assert code == 0 and fig.is_file() and "num_speculative_tokens_per_batch_size" in out
    for argv, option in ((["plan", "--from", str(tmp_path / "nope.txt"), "--c", "0"], "--from"),
                         (["plan", "--from", str(FIXTURES / "llama_server.log"), "--c", "0"], "--from"),
                         (["plan", "--from", str(path), "--c", "0", "--alpha", "0.5"], "--from"),
                         (["plan", "--alpha", "0.5", "--c", "0", "--engine", "vllm"], "--engine"),
                         (["plan", "--from", str(path), "--c", "0", "--batch-cost-file", str(path)], "--batch-cost-file"),
                         (["plan", "--from", "http://127.0.0.1:9/metrics", "--c", "0"], "--from")):
        code, out, err = run_main(capsys, argv)
        assert code == 2 and option in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.slow
def test_default_target_decode_to_engine_plan(capsys, tmp_path) -> None:
    """The whole path on the real default target: t(B, k) measured by `estimate --drafter none
    --batch-sizes`, the counts of a real `decode --json`, then `plan --from` with both."""
    code, out, _ = run_main(capsys, ["estimate", "--drafter", "none", "--batch-sizes", "1,2", "--batch-max-k", "3",
                                     "--timing-repeats", "2", "--json"])
    assert code == 0
    costs = tmp_path / "costs.json"
    costs.write_text(out)
    assert strict_json(out)["batch_timing"]["batch_sizes"] == [1, 2]
    code, out, _ = run_main(capsys, ["decode", "--prompt", "The cat sat on the mat. The cat sat on the mat. The cat",
                                     "--drafter", "lookup", "--gamma", "3", "--temperature", "0",
                                     "--max-new-tokens", "24", "--json"])
    assert code == 0
    decoded = tmp_path / "decode.json"
    decoded.write_text(out)
    code, out, _ = run_main(capsys, ["plan", "--from", str(decoded), "--c", "0", "--batch-cost-file", str(costs),
                                     "--engine", "hf", "--json"])
    assert code == 0
    r = strict_json(out)
    assert r["source"] == "specdec-decode" and r["batch"]["batch_sizes"] == [1, 2]


def test_cli_batch_plan_per_context_from_a_serve_bench_file(capsys, tmp_path) -> None:
    """serve.json times t(B, k) at two contexts: the plan gives the best gamma per batch-size range at
    each, and vLLM's per-batch-size draft lengths at the stated --context (interpolated between them)."""
    path = FIXTURES / "vllm_metrics.txt"
    short = [[0.010, 0.011, 0.012, 0.013], [0.012, 0.013, 0.014, 0.015], [0.016, 0.017, 0.018, 0.019]]
    long = [[0.020, 0.021, 0.022, 0.023], [0.030, 0.045, 0.060, 0.075], [0.060, 0.120, 0.180, 0.240]]
    serve = tmp_path / "serve.json"
    serve.write_text(json.dumps({"kind": "specdec.serve-bench", "contexts": [
        {"context": n, "timing": {"batch_sizes": [1, 4, 16], "seconds": t, "context_tokens": n, "device": "cpu"}}
        for n, t in ((128, short), (1024, long))]}))
    argv = ["plan", "--from", str(path), "--c", "0", "--batch-cost-file", str(serve), "--engine", "vllm", "--json"]
    code, out, err = run_main(capsys, argv + ["--context", "576"])
    assert code == 0, err
    b = strict_json(out)["batch"]
    assert b["context_tokens"] == 576
    assert b["speedup"][0][0] == 1.0 and [r["context"] for r in b["ranges_by_context"]] == [128, 1024]
    at = {r["context"]: r["ranges"] for r in b["ranges_by_context"]}
    assert at[128][-1][2] > 0 and at[1024][-1][2] == 0  # long contexts stop paying at B = 16, short ones do not
    config = strict_json(out)["engine_config"]["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert config == [list(r) for r in b["ranges"]]
    for extra, option in ((["--context", "4096"], "--context"), ([], "--context")):
        code, _, err = run_main(capsys, argv + extra)
        assert code == 2 and option in err and len(err.strip().splitlines()) == 1, err


def test_a_draft_share_prices_the_plain_steps_between_drafts() -> None:
    """Monte Carlo: a drafter that drafts gamma tokens on a share s of the steps (an n-gram lookup
    that finds a match), each accepted with per-position alpha_i, and leaves the others plain; its
    tokens per target-step of time equal the plan's speedup with draft_share s, at every gamma."""
    from specdec.simulator.counts import Acceptance

    rng = np.random.default_rng(0)
    alphas, share, c = (0.9, 0.8, 0.7, 0.6), 0.3, 0.05
    v = (1.0, 1.6, 1.9, 2.2, 2.5)
    acceptance = Acceptance(alphas, (None,) * 4, "test", 4, {})
    plan = engine_plan(acceptance, c, "test", verify_cost=v, draft_share=share)
    assert plan.draft_share == share and engine_plan_dict(plan)["draft_share"] == share
    n = 400_000
    for gamma in (1, 2, 4):
        drafted = rng.random(n) < share
        lead = np.cumprod(rng.random((n, gamma)) < np.array(alphas[:gamma]), axis=1).sum(axis=1)
        tokens = np.where(drafted, 1 + lead, 1).sum()
        seconds = np.where(drafted, gamma * c + v[gamma], 1.0).sum()
        assert tokens / seconds == pytest.approx(plan.plan.walltime_improvement[gamma], rel=0.005)
    every = engine_plan(acceptance, c, "test", verify_cost=v)
    assert every.draft_share is None and every.plan.walltime_improvement[4] > plan.plan.walltime_improvement[4]
