"""llama.cpp in the loop (`specdec llamacpp costs|validate`, engines/llamacpp/costs.py,
validation.py): bad input is one line and exit 2 before any server starts; a real llama-server
times t(k) with every step a k-token verify (its own counters say so) into a cost file `plan
--batch-cost-file` reads; a real validation run pairs each configuration with no speculation; a
server that dies mid-run is one line and leaves no process behind. Prediction (a)'s arithmetic
and the advice's flags are checked on hand-made values. Real-server tests are skipped only when
llama-server is not built (scripts/llamacpp.sh).
"""
from __future__ import annotations

import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from specdec.costfiles import read_batch_times
from specdec.engines.llamacpp.config import config_lines, configure, ngram_flags
from specdec.engines.llamacpp.costs import _dense
from specdec.engines.llamacpp.server import default_model, find_binary
from specdec.engines.llamacpp.batches import BatchRecord, joint_from_counts, joint_from_steps, waves
from specdec.engines.llamacpp.estimated import category_estimates, gamma_of, predicted_b
from specdec.engines.llamacpp.trace import draft_lengths, verify_steps
from specdec.engines.llamacpp.draft_loop import (LoopCosts, draft_counts, fit, loop_config, sample_counts,
                                                 target_part)
from specdec.engines.llamacpp.validation import (EngineCosts, Record, cells, draft, from_flags, metrics_page, ngram,
                                                 predicted_seconds, synthetic)
from specdec.engines.metrics import read_counts
from specdec.errors import SpecdecError
from tests.cli_helpers import run_main, strict_json


def _binary() -> Path:
    try:
        return find_binary()
    except SpecdecError as exc:
        pytest.skip(f"llama-server not built: {exc}")


def _servers() -> set[int]:
    """Process ids of the llama-server processes running now (a zombie is not running)."""
    out = subprocess.run(["ps", "-eo", "pid,stat,comm"], capture_output=True, text=True).stdout.splitlines()[1:]
    return {int(p) for p, st, comm in (line.split(None, 2) for line in out)
            if comm.strip().startswith("llama-server") and not st.startswith("Z")}


@pytest.fixture(autouse=True)
def no_new_servers():
    """Every test leaves no llama-server it started behind."""
    before = _servers()
    yield
    deadline = time.monotonic() + 10
    while _servers() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _servers() - before


@pytest.mark.parametrize("argv, option", [
    (["costs", "--k", "2,3", "--out", "x.json"], "--k"),
    (["costs", "--llama-server", "/nonexistent/llama-server", "--out", "x.json"], "--llama-server"),
    (["costs", "--model", "/etc/hostname", "--out", "x.json"], "--model"),
    (["costs", "--batch-sizes", "2,1", "--out", "x.json"], "--batch-sizes"),
    (["validate", "--costs", "/nonexistent.json", "--out", "x.json"], "--costs"),
    (["validate", "--costs", "BADCOST", "--out", "x.json"], "--costs"),
    (["validate", "--costs", "COSTS", "--grid", "a=--spec-draft-n-max 3", "--out", "x.json"], "--grid"),
    (["validate", "--costs", "COSTS", "--advise-from", "nope", "--out", "x.json"], "--advise-from"),
    (["validate", "--costs", "COSTS", "--temperatures", "-1", "--out", "x.json"], "--temperatures"),
    (["validate", "--costs", "COSTS", "--workloads", "nosuch", "--out", "x.json"], "--workloads"),
    (["validate", "--costs", "COSTS", "--batch-sizes", "1,4", "--out", "x.json"], "--batch-sizes"),
    (["validate", "--costs", "COSTS", "--draft", "TARGET", "--out", "x.json"], "--draft"),
    (["validate", "--costs", "COSTS", "--draft-p-min", "0.5,0.3", "--out", "x.json"], "--draft-p-min"),
    (["validate", "--costs", "COSTS", "--draft-p-min", "1.5", "--out", "x.json"], "--draft-p-min"),
    (["validate", "--costs", "COSTS", "--draft", "/etc/hostname", "--out", "x.json"], "--draft"),
    (["validate", "--costs", "COSTS", "--estimate", "nope=x.json", "--out", "x.json"], "--estimate"),
    (["validate", "--costs", "COSTS", "--estimate", "none=/etc/hostname", "--out", "x.json"], "--estimate"),
    (["costs", "--draft", "/etc/hostname", "--out", "x.json"], "--draft"),
    (["costs", "--k", "1,2", "--draft", "TARGET", "--out", "x.json"], "--k"),  # one draft length: P1, s not apart
    (["costs", "--batch-sizes", "2,4", "--draft", "TARGET", "--out", "x.json"], "--batch-sizes"),
])
def test_bad_input_is_one_line_before_any_server(capsys, tmp_path, argv, option) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "specdec.estimate"}')
    good = tmp_path / "costs.json"
    good.write_text('{"batch_timing": [{"batch_sizes": [1], "seconds": [[0.01, 0.02]], "context_tokens": 128}]}')
    names = {"BADCOST": str(bad), "COSTS": str(good), "x.json": str(tmp_path / "x.json")}
    if "TARGET" in argv:  # a real GGUF the cost file did not time as a draft
        names["TARGET"] = str(default_model())
    argv = [names.get(a, a) for a in argv]
    start = time.monotonic()
    code, out, err = run_main(capsys, ["llamacpp", *argv])
    assert code == 2 and option in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - start < 5 and not (tmp_path / "x.json").exists()


def test_prediction_a_counts_the_steps_the_engine_reported() -> None:
    costs = EngineCosts((100, 300), ((0.010, 0.016, 0.020, 0.024), (0.012, 0.018, 0.022, 0.026)), 0.001)
    assert costs.t(2.5, 100) == pytest.approx(0.018) and costs.t(1, 200) == pytest.approx(0.011)
    assert costs.t(6, 100) == pytest.approx(0.032)  # past the longest timed k: the last slope
    # 33 tokens in 32 steps: 4 verify steps of 3 drafts (k = 4), 6 accepted, 22 plain steps
    r = Record("x", 0.0, "p", "c", 0, 33, 500.0, 84, drafts=4, draft_tokens=12, accepted=6)
    predicted, plain = predicted_seconds(r, costs)
    t1, t4 = costs.t(1, 100.5), costs.t(4, 100.5)
    assert predicted == pytest.approx(22 * t1 + 4 * t4 + 6 * 0.001) and plain == pytest.approx(32 * t1)


def test_a_draft_models_tokens_are_priced_at_its_own_step() -> None:
    costs = EngineCosts((100,), ((0.010, 0.016, 0.020, 0.024),), 0.0, (("/m/d.gguf", (100,), (0.002,)),))
    config = draft(Path("/m/d.gguf"), 3)
    assert config.draft_model == Path("/m/d.gguf") and "--spec-draft-n-max 3" in config.command_line()
    assert (config.n_max, config.p_min, config.label) == (3, 0.0, "draft d g3")
    rec = Record("d", 0, "p", "c", 0, tokens=21, decode_ms=0, prompt_tokens=90, drafts=5, draft_tokens=15,
                 accepted=5)
    # 20 tokens: 5 verify steps of 4 tokens, 10 plain: 15 target steps, each followed by the draft's pass
    # over its batch; 5 drafts of 3: one pass for the last sampled token and one after each token but the 3rd
    assert predicted_seconds(rec, costs, config)[0] == pytest.approx(10 * 0.010 + 5 * 0.024 + (15 + 15) * 0.002)
    with pytest.raises(SpecdecError, match="did not time the draft"):
        costs.t_draft(Path("/m/other.gguf"), 100)


def test_drafts_are_priced_at_their_own_lengths_where_traced() -> None:
    """t(k) is concave (here t(2) - t(1) = 8 ms, t(4) - t(3) = 2 ms): two drafts of 1 and 3 tokens
    cost t(2) + t(4) = 42 ms, less than two at the mean length, 2 t(3) = 44 ms — what an untraced
    record falls back to."""
    costs = EngineCosts((100,), ((0.010, 0.018, 0.022, 0.024),), 0.0)
    traced = Record("s", 0, "p", "c", 0, tokens=9, decode_ms=0, prompt_tokens=96, drafts=2, draft_tokens=4,
                    accepted=2, lengths=[0, 1, 0, 1])
    untraced = Record("s", 0, "p", "c", 0, tokens=9, decode_ms=0, prompt_tokens=96, drafts=2, draft_tokens=4,
                      accepted=2)
    plain = 8 - 2 - 2
    assert predicted_seconds(traced, costs)[0] == pytest.approx(plain * 0.010 + 0.018 + 0.024)
    assert predicted_seconds(untraced, costs)[0] == pytest.approx(plain * 0.010 + 2 * 0.022)
    assert from_flags("n", "--spec-type ngram-simple").traced and not from_flags("none", "").traced


def test_a_confidence_cut_off_prices_the_traced_draft_lengths() -> None:
    """At p-min > 0 a draft stops where its confidence fell (one more pass: the look that failed)
    and every plain step was an attempt that drafted nothing (two passes: the batch, the look)."""
    costs = EngineCosts((100,), ((0.010, 0.016, 0.020, 0.024),), 0.0, (("/m/d.gguf", (100,), (0.002,)),))
    config = draft(Path("/m/d.gguf"), 3, 0.5)
    assert (config.p_min, config.label) == (0.5, "draft d g3 p0.5") and "--spec-draft-p-min 0.5" in config.command_line()
    # 20 tokens: 4 drafts (lengths 1, 2, 3, 3; 9 tokens, 4 accepted), 12 plain steps
    rec = Record("d", 0, "p", "c", 0, tokens=21, decode_ms=0, prompt_tokens=90, drafts=4, draft_tokens=9,
                 accepted=4, lengths=[0, 1, 1, 2])
    steps, attempts, looks = 16, 16, 9 - 2  # the two full drafts need no pass after their last token
    assert draft_counts(rec, config) == (steps, 9, attempts + looks)
    verify = 0.016 + 0.020 + 2 * 0.024  # each traced draft at its own length: 1, 2, 3, 3
    assert predicted_seconds(rec, costs, config)[0] == pytest.approx(12 * 0.010 + verify + 39 * 0.002)
    with pytest.raises(SpecdecError, match="no traced draft lengths"):
        draft_counts(Record("d", 0, "p", "c", 0, 21, 0, 90, 4, 9, 4), config)
    # nothing drafted in 20 steps: each still paid the pass over its batch and the look that failed
    assert draft_counts(Record("d", 0, "p", "c", 0, 21, 0, 90, 0, 0, 0, lengths=[0]), config) == (20, 0, 20)
    # timed in the loop: the batch pass, each token in it and a look priced apart (at the context 90 + 21 / 2, midway)
    loop = EngineCosts(costs.contexts, costs.seconds, 0.0, costs.drafts,
                       (("/m/d.gguf", LoopCosts((0.5, 200.5), ((0.001, 0.0002, 0.002), (0.005, 0.0006, 0.006)))),))
    assert loop.draft_parts(Path("/m/d.gguf"), 100.5) == pytest.approx((0.003, 0.0004, 0.004))
    assert predicted_seconds(rec, loop, config)[0] == pytest.approx(
        12 * 0.010 + verify + 16 * 0.003 + 9 * 0.0004 + 23 * 0.004)


def test_the_drafts_loop_costs_come_from_servers_that_isolate_them() -> None:
    """m drafts a step all rejected (n-max m, synthetic rates 0) or none (p-min 2: every look
    fails); each sample counted as common/speculative.cpp runs it, its target part at t(k), and
    the least squares recovers (P0, P1, s) from samples of that model, a part the noise makes
    negative set to 0."""
    none, three = loop_config(Path("t.gguf"), Path("d.gguf"), 0, 512, 2), loop_config(Path("t.gguf"), Path("d.gguf"),
                                                                                  3, 512, 2)
    assert none.spec_type == three.spec_type == "draft-simple"
    assert " ".join(none.flags()).endswith("--spec-draft-n-max 1 --spec-draft-p-min 2 --spec-synth-rates 0")
    assert " ".join(three.flags()).endswith("--spec-draft-n-max 3 --spec-draft-p-min 0 --spec-synth-rates 0,0,0")
    assert sample_counts(0, 31, 0) == (31, 0, 30)  # the last step has one token left: nothing to draft
    assert sample_counts(3, 31, 88) == (31, 88, 88)
    # 1 plain step, 30 verifies of 1 + 88 / 30 tokens: t(3 + 14 / 15)
    assert target_part(31, 30, 88, [0.010, 0.016, 0.020, 0.024]) == pytest.approx(
        0.010 + 30 * (0.020 + 0.004 * 14 / 15))
    truth = np.array([0.002, 0.0003, 0.0035])
    rows = [(31, *sample_counts(m, 31, 0 if m == 0 else 31 * m - 2)[1:]) for m in range(5) for _ in range(3)]
    exact = [(S, G, Q, float(truth @ [S, G, Q])) for S, G, Q in rows]
    assert fit(exact) == pytest.approx(tuple(truth))
    rng = np.random.default_rng(0)  # 0.1 ms of noise on a sample's ~0.3 s: each part within 0.03 ms
    noisy = [(S, G, Q, y + rng.normal(0, 0.0001)) for S, G, Q, y in exact]
    assert np.allclose(fit(noisy), truth, atol=3e-5)
    # a batch pass that gets cheaper with more tokens: P1 held at 0, the rest fitted without it
    flat = [(S, G, Q, 0.002 * S + 0.0035 * Q - 0.0001 * G) for S, G, Q, _ in exact]
    p0, p1, look = fit(flat)
    x = np.array([[S, Q] for S, _, Q, _ in flat], dtype=float) / 31
    want = np.linalg.lstsq(x, np.array([y for *_, y in flat]) / 31, rcond=None)[0]
    assert p1 == 0 and (p0, look) == pytest.approx(tuple(want))
    with pytest.raises(SpecdecError, match="two draft lengths"):  # m = 0 and 1 only: P1 and s not apart
        fit([row for row, m in zip(exact, [m for m in range(5) for _ in range(3)]) if m <= 1])


def test_draft_lengths_read_a_captured_trace() -> None:
    """tests/fixtures/llamacpp/trace_draft_simple.log: a real llama-server's log of one request of a
    draft-model row (LLAMA_TRACE=1, n-max 4, p-min 0.5; `capture.py trace`): the lengths it gives
    agree with the counters the same server reported around the request, and pricing reads them."""
    fixtures = Path(__file__).parent / "fixtures" / "llamacpp"
    counts = strict_json((fixtures / "trace_draft_simple.json").read_text())
    steps = verify_steps((fixtures / "trace_draft_simple.log").read_text())
    assert {slot for slot, _, _ in steps} == {0} and sum(n for _, _, n in steps) == counts["accepted_tokens"]
    lengths = draft_lengths(steps)
    assert len(lengths) <= 5 and lengths[0] == 0 and lengths[1] > 0  # p-min cut drafts short of n-max 4
    assert sum(lengths) == counts["drafts"] and sum(n * k for n, k in enumerate(lengths)) == counts["draft_tokens"]
    rec = Record("d", 0, "p", "code", 0, 65, 0, 80, counts["drafts"], counts["draft_tokens"],
                 counts["accepted_tokens"], lengths=lengths)
    steps = 64 - counts["accepted_tokens"]
    S, G, Q = draft_counts(rec, from_flags("d", counts["flags"]))
    assert (S, G, Q) == (steps, counts["draft_tokens"], steps + counts["draft_tokens"] - sum(lengths[4:]))
    assert verify_steps("no trace here") == [] and draft_lengths([]) == [0]


def test_prediction_b_prices_the_estimators_replay() -> None:
    costs = EngineCosts((100,), ((0.010, 0.016, 0.020, 0.024),), 0.0, (("/m/d.gguf", (100,), (0.002,)),))
    rec = Record("x", 0, "p", "code", 0, tokens=11, decode_ms=0, prompt_tokens=95, drafts=0, draft_tokens=0,
                 accepted=0)
    estimate = {"category": "code", "replay": {"3": {"tokens_per_iteration": 2.0, "proposed": [1, 0, 0, 3]}}}
    lookup = from_flags("n1", "--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 3")
    assert gamma_of(lookup) == 3
    # per token: (0.25 t(1) + 0.75 t(4)) / 2 against t(1)
    assert predicted_b(lookup, [rec], category_estimates(estimate, lookup, Path("e")), costs) == pytest.approx(
        0.010 / ((0.25 * 0.010 + 0.75 * 0.024) / 2))
    synth = from_flags("s", "--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 3 "
                            "--spec-synth-rates 0.5,0.25,0.125")
    tokens = 1 + 0.75 * 0.875  # the rates, not the replay's tokens, on the replay's proposals
    assert predicted_b(synth, [rec], category_estimates(estimate, synth, Path("e")), costs) == pytest.approx(
        0.010 / ((0.25 * 0.010 + 0.75 * 0.024) / tokens))
    tree = {"category": "code", "replay": {"3": {"tokens_per_iteration": 2.0, "proposed": [1, 0, 0, 1, 0, 2]}}}
    with pytest.raises(SpecdecError, match="token-tree drafter; llama.cpp drafts chains"):
        category_estimates(tree, lookup, Path("e"))  # 5 nodes verified at gamma 3: a tree's law, not a chain's
    model = draft(Path("/m/d.gguf"), 3)
    # every step pays the draft's pass over its batch; a draft of 3 its 3 looks
    assert predicted_b(model, [rec], category_estimates(estimate, model, Path("e")), costs) == pytest.approx(
        0.010 / ((0.25 * (0.010 + 0.002) + 0.75 * (0.024 + 4 * 0.002)) / 2))


def test_prediction_b_of_a_cut_off_reads_the_top_10_confidence_law() -> None:
    """Half the positions at confidence 0.25 never accepted, half at 0.97 always: at p-min 0.5 and
    n_max 2, P(L = 0, 1, 2) = 0.5, 0.25, 0.25, E tokens 1.75, draft forwards 0.75 + 0.75 failed
    looks, plus the pass over the verified batch."""
    from specdec.reference.estimate.confidence import ConfidenceCounts

    costs = EngineCosts((100,), ((0.010, 0.016, 0.020, 0.024),), 0.0, (("/m/d.gguf", (100,), (0.002,)),))
    rec = Record("x", 0, "p", "code", 0, tokens=11, decode_ms=0, prompt_tokens=95, drafts=0, draft_tokens=0,
                 accepted=0)
    law = ConfidenceCounts.of(np.array([0.25, 0.97] * 50), np.array([0.0, 1.0] * 50)).to_dict()
    config = draft(Path("/m/d.gguf"), 2, 0.5)
    with pytest.raises(SpecdecError, match="top 10"):
        category_estimates({"category": "code", "confidence_law": law}, config, Path("e"))
    (e,) = category_estimates({"category": "code", "confidence_law": {**law, "top_k": 10}}, config,
                              Path("e")).values()
    assert e.proposed == pytest.approx([0.5, 0.25, 0.25]) and e.tokens == pytest.approx(1.75)
    assert e.looks == pytest.approx(1.5)
    per_iteration = 0.5 * 0.010 + 0.25 * 0.016 + 0.25 * 0.020 + 2.5 * 0.002
    assert predicted_b(config, [rec], {"code": e}, costs) == pytest.approx(0.010 / (per_iteration / 1.75))
    loop = EngineCosts(costs.contexts, costs.seconds, 0.0, costs.drafts,
                       (("/m/d.gguf", LoopCosts((100,), ((0.003, 0.001, 0.002),))),))
    per_iteration += 0.001 + 0.75 * 0.001  # P0 0.003 (not 0.002) a batch pass, P1 for each of 0.75 tokens
    assert predicted_b(config, [rec], {"code": e}, loop) == pytest.approx(0.010 / (per_iteration / 1.75))


def test_a_round_sends_every_request_once_in_waves_of_different_prompts() -> None:
    for B in (1, 2, 4, 8):
        for repeat in range(3):
            rounds = waves(8, B, repeat)
            assert len(rounds) == 8 // B and all(len(set(w)) == B for w in rounds)
            assert sorted(j for w in rounds for j in w) == list(range(8))
    assert waves(1, 2, 0) == [[0, 0]] and waves(3, 2, 1) == [[1, 2], [0, 1]]  # the last wave wraps to fill


def test_the_joint_from_the_engines_counters_keeps_its_means() -> None:
    # 40 steps: 10 drafts of 35 tokens in all (3.5 each), accepted at positions 1..4: 8, 5, 2, 1 (16 in all)
    joint = joint_from_counts(40, 10, 35, [8, 5, 2, 1])
    assert joint.sum() == pytest.approx(40) and joint[0, 0] == pytest.approx(30)
    k, n = np.arange(joint.shape[0]), np.arange(joint.shape[1])
    assert joint.sum(axis=1) @ k == pytest.approx(35) and joint.sum(axis=0) @ n == pytest.approx(16)
    assert np.all(np.triu(joint, 1) == 0)


def test_the_joint_from_traced_steps_is_the_steps_themselves() -> None:
    """Two requests of 9 tokens (8 steps after the prompt's): traced verify steps (3, 2), (3, 0) and
    (1, 1) on the first, nothing drafted on the second — the joint counts them where they happened;
    a trace that does not add up to the counters is not used (None: `joint_from_counts`)."""
    a = BatchRecord("s", 1, 0, 0, "p", 9, 1.0, 50, drafts=3, draft_tokens=7, accepted=3,
                    steps=[[3, 2], [3, 0], [1, 1]])
    b = BatchRecord("s", 1, 0, 0, "q", 9, 1.0, 50, wave=1)
    joint = joint_from_steps([a, b])
    assert joint.shape == (4, 4) and (joint[3, 2], joint[3, 0], joint[1, 1]) == (1, 1, 1)
    assert joint[0, 0] == (8 - 3 - 3) + 8 and joint.sum() == 16 - 3
    a.accepted = 4
    assert joint_from_steps([a, b]) is None and joint_from_steps([b]) is None


def test_metrics_page_is_what_plan_reads() -> None:
    rows = [Record("x", 0.0, "p", "c", 0, 40, 1.0, 10, 3, 12, 5, [3, 2, 0, 0]),  # as wide as the page lists
            Record("x", 0.0, "q", "c", 0, 40, 1.0, 10, 1, 4, 0, [0, 0, 0, 0])]
    counts = read_counts(metrics_page(rows))
    assert (counts.drafts, counts.draft_tokens, counts.accepted_tokens) == (4, 16, 5)
    assert counts.k == 4 and counts.reached[:2] == [4, 3] and counts.accepted[:2] == [3, 2]


def test_plan_prices_llama_cpps_batches_as_its_micro_batches(capsys) -> None:
    """`plan --from` a llama.cpp page (ngram-simple on the edit prompts at f32) with the engine's cost
    file: the batch table is the equal-split one (each slot drafting on the page's share), which at
    B = 1 is the single-sequence plan and at B > 1 below one packed pass over the same slots."""
    from specdec.simulator.ragged import joint_from_alphas, predict_ragged

    data = Path(__file__).parents[1] / "benchmarks" / "data" / "llamacpp" / "f32" / "epyc"
    page, costs = data / "validate-f32-edit.T0.metrics.txt", data / "costs-b1248-f32.json"
    code, out, err = run_main(capsys, ["plan", "--from", str(page), "--c", "0", "--batch-cost-file", str(costs), "--json"])
    assert code == 0, err
    r = strict_json(out)
    b = r["batch"]
    assert b["equal_split"] and 0 < r["draft_share"] < 1 and b["batch_sizes"] == [1, 2, 4, 8]
    speedup = np.array(b["speedup"])
    plan = {row["gamma"]: row["speedup"] for row in r["plan"]["table"]}
    assert all(speedup[0, g] == pytest.approx(plan[g], rel=0.02) for g in b["gammas"])  # B = 1: the plan
    t, share, alphas = read_batch_times(costs)[0].seconds, r["draft_share"], r["acceptance"]["alpha_per_position"]
    for i, B in enumerate(b["batch_sizes"][1:], 1):  # one packed pass over the same slots costs less
        for g in b["gammas"][1:]:
            joint = share * joint_from_alphas(alphas, g)
            joint[0, 0] += 1 - share
            assert speedup[i, g] < predict_ragged(joint, B, t[i], 0.0, packed=True).speedup
    code, out, err = run_main(capsys, ["plan", "--from", str(page), "--c", "0", "--batch-cost-file", str(costs)])
    assert code == 0 and "equal micro-batches" in out and "every slot drafting on that share" in out


def test_ngram_flags_set_the_draft_length_llama_cpp_reads() -> None:
    flags = ngram_flags(2)
    assert flags["ngram-simple"] == "--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-ngram-simple-size-m 2"
    assert flags["ngram-mod"].endswith("--spec-ngram-mod-n-max 2")
    c = ngram("ngram-simple", 16)
    assert c.spec_type == "ngram-simple" and c.command_line() == ngram_flags(16)["ngram-simple"]
    assert from_flags("a", c.command_line()) == Config_like(c)
    s = synthetic(3, 0.5)
    assert s.flags[-1] == "0.5,0.25,0.125"
    lines = config_lines({"flags": "--spec-draft-n-max 4", "flags_older": "--draft-max 4",
                          "flags_ngram": ngram_flags(4)})
    assert any("ngram-simple" in line and "--spec-ngram-simple-size-m 4" in line for line in lines)


def _plan_of(speedups):
    """What `configure` reads of an engine plan: the speedup per gamma and the best gamma."""
    from types import SimpleNamespace

    return SimpleNamespace(plan=SimpleNamespace(walltime_improvement=list(speedups),
                                                optimal_gamma=int(np.argmax(speedups))))


def test_advice_keeps_ngram_simple_at_the_lookup_its_counts_came_from() -> None:
    """`plan --from` prints ngram-simple's flags at its best gamma of at least its lookup, and the
    advice run runs exactly those (2026-11-27 at f32 it ran gamma 2's flags while saying gamma 3)."""
    from specdec.engines.llamacpp.config import ngram_simple_gamma

    speedups = [1.0, 1.011, 0.99, 0.97, 0.95]  # gamma 1 best: for ngram-simple it would shorten the lookup
    assert ngram_simple_gamma(speedups) == 0 and ngram_simple_gamma([1.0, 1.02, 1.05, 1.04]) == 3
    config = configure(_plan_of([1.0, 1.02, 1.05, 1.04]), "ngram")
    assert config["draft_max"] == 2 and config["gamma_ngram_simple"] == 3
    assert config["flags_ngram"] == {"ngram-simple": ngram_flags(3)["ngram-simple"],
                                     "ngram-mod": ngram_flags(2)["ngram-mod"]}
    lines = config_lines(config)
    assert any(line.startswith("note: ngram-simple cannot draft fewer") and "best gamma is 3" in line for line in lines)
    config = configure(_plan_of(speedups), "ngram")
    assert list(config["flags_ngram"]) == ["ngram-mod"] and "does not pay" in config_lines(config)[-1]
    assert not any(line.startswith("note:") for line in config_lines(
        configure(_plan_of([1.0, 1.1, 1.2, 1.3, 1.35, 1.3]), "ngram")))


def test_forced_acceptance_is_no_rival_of_the_advice() -> None:
    """Synthetic acceptance benchmarks the costs: its output is not the target's, so the advice is
    never measured against it (at f32 it was the fastest row of the grid, 2026-11-27)."""
    assert synthetic(4, 0.8).synthetic and from_flags("s", "--spec-type ngram-simple --spec-synth-len 3").synthetic
    assert not ngram("ngram-simple", 4).synthetic and not ngram("ngram-mod", 8).synthetic
    assert not draft(Path("/m/d.gguf"), 3).synthetic


def Config_like(c):
    return type(c)("a", c.spec_type, c.flags)


def test_costs_and_validation_on_a_real_server(capsys, tmp_path) -> None:
    _binary()
    out = tmp_path / "costs.json"
    code, stdout, err = run_main(capsys, ["llamacpp", "costs", "--k", "1,3", "--batch-sizes", "1", "--contexts",
                                          "128", "--repeats", "1", "--new-tokens", "24", "--out", str(out)])
    assert code == 0, err
    data = strict_json(out.read_text())
    raw = data["raw"][0]
    assert raw["draft_share"][1] > 0.8 and raw["mean_draft"][1] > 1.5  # the engine's counters: k-token verifies
    assert raw["prompt_tokens"] < 160  # timed near the 128 tokens asked for, not two 40-number periods (228)
    assert data["engine"]["commit"] and "--spec-synth-rates" in data["engine"]["server_flags"]
    (table,) = read_batch_times(out)
    assert table.batch_sizes == (1,) and len(table.seconds[0]) == 3 and table.seconds[0][2] > table.seconds[0][0]
    code, stdout, err = run_main(capsys, ["plan", "--from", str(Path(__file__).parent / "fixtures" / "llamacpp" /
                                                                "metrics_ngram_simple.txt"),
                                          "--c", "0", "--batch-cost-file", str(out), "--json"])
    assert code == 0, err
    result = tmp_path / "val.json"
    code, stdout, err = run_main(capsys, [
        "llamacpp", "validate", "--costs", str(out), "--workloads", "chat", "--prompts", "1", "--temperatures", "0",
        "--repeats", "1", "--new-tokens", "16", "--grid", "s=--spec-type ngram-simple --spec-ngram-simple-size-n 1 "
        "--spec-ngram-simple-size-m 2 --spec-synth-rates 0.5,0.25", "--no-advise", "--out", str(result)])
    assert code == 0, err
    v = strict_json(result.read_text())
    (cell,) = v["cells"]
    assert cell["config"] == "s" and cell["pairs"] == 1 and 0 < cell["predicted"] < 5 and "s" in stdout
    (rec,) = [r for r in v["records"] if r["config"] == "s"]
    assert rec["drafts"] > 0 and rec["accepted"] <= rec["draft_tokens"] <= 2 * rec["drafts"]


def test_the_mixed_steps_are_timed_on_the_speculating_server(capsys, tmp_path) -> None:
    """--mixed-k: on -np 2's servers verifying 2 and 5 tokens (lookups of 1 and 4), the steps of 0, 1
    and 2 drafting slots; the plain slots' numbers (a presence penalty, its cost timed) draft nothing,
    even where one token is the lookup, so a step with one drafting slot drafts at half the slots' steps."""
    _binary()
    out = tmp_path / "costs.json"
    code, _, err = run_main(capsys, ["llamacpp", "costs", "--k", "1,2,5", "--batch-sizes", "2", "--contexts", "128",
                                     "--repeats", "1", "--new-tokens", "16", "--mixed-k", "2,5", "--out", str(out)])
    assert code == 0, err
    data = strict_json(out.read_text())
    (table,), (raw,) = data["batch_timing"], data["raw"]
    assert [m["k"] for m in table["mixed"]] == [2, 5] and [m["k"] for m in raw["mixed"]] == [2, 5]
    for k, mixed, row in zip((2, 5), table["mixed"], raw["mixed"]):
        plain, one, both = mixed["seconds"][0]
        assert plain < one and both == pytest.approx(_dense(raw["k_timed"], raw["seconds"], 5)[k - 1])  # t(2, k)
        assert row["share"][0] < 0.1 and 0.35 < row["share"][1] < 0.55
        assert abs(row["sampling_seconds"]) < 0.2 * plain
    for ks, mixed in (("1,5", "6"), ("1,5", "1")):  # not timed; no draft to verify
        code, _, err = run_main(capsys, ["llamacpp", "costs", "--k", ks, "--mixed-k", mixed, "--out",
                                         str(tmp_path / "x.json")])
        assert code == 2 and "--mixed-k" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.json").exists()


def test_batches_and_a_draft_model_row_on_a_real_server(capsys, tmp_path) -> None:
    """B concurrent clients against -np B, predicted from t(B, k); a draft-model row (the target's
    own GGUF as its draft: the engine accepts nearly every draft at T = 0) priced at its own step;
    prediction (b) from a real `specdec estimate --json` of the matching specdec drafter."""
    _binary()
    target = default_model()
    out = tmp_path / "costs.json"
    code, _, err = run_main(capsys, ["llamacpp", "costs", "--k", "1,2,3", "--batch-sizes", "1,2", "--contexts", "128",
                                     "--repeats", "1", "--new-tokens", "16", "--draft", str(target), "--out", str(out)])
    assert code == 0, err
    data = strict_json(out.read_text())
    (timed,) = data["draft_seconds"].values()
    assert 0 < timed["seconds"][0] < 1 and data["batch_timing"][0]["batch_sizes"] == [1, 2]
    # the draft in the loop: m = 0, 1, 2 drafts a step (n-max m, all rejected: the server's counters)
    loop = timed["loop"]
    assert {m for m, *_ in loop["samples"][0]} == {0, 1, 2} and loop["batch_pass"][0] + loop["look"][0] > 0
    assert all((G == 0) if m == 0 else (G > (m - 1) * S) for m, S, G, Q, _ in loop["samples"][0])
    grid = "s=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 2 --spec-synth-rates 0.9,0.81"
    result = tmp_path / "batches.json"
    code, stdout, err = run_main(capsys, ["llamacpp", "validate", "--costs", str(out), "--batch-sizes", "1,2",
                                          "--workloads", "edit", "--prompts", "1", "--temperatures", "0", "--repeats",
                                          "1", "--new-tokens", "16", "--grid", grid, "--out", str(result)])
    assert code == 0, err
    b = strict_json(result.read_text())
    (config,) = b["temperatures"][0]["configs"]
    assert [p["batch"] for p in config["points"]] == [1, 2] and "crossover" in config and "B=2" in stdout
    assert len(config["crossover_range"]) == 2 and "the 95 % intervals" in stdout
    assert all(p["pairs"] == p["batch"] and 0.2 < p["predicted"] < 5 and p["tokens_per_step"] > 1
               and 0.2 < p["predicted_one_pass"] < 5 and p["decodes_per_step"] >= 1 for p in config["points"])
    rows = [r for r in b["temperatures"][0]["records"] if r["config"] == "s"]
    assert len([r for r in rows if r["batch"] == 2]) == 2
    # every verify step traced to its slot, adding up to the wave's counters; the joint of B = 1 is the trace's
    for head in (r for r in rows if r["slot"] == 0):
        wave = [r for r in rows if (r["batch"], r["wave"]) == (head["batch"], head["wave"])]
        assert sum(len(r["steps"]) for r in wave) == head["drafts"] > 0
        assert sum(n for r in wave for _, n in r["steps"]) == head["accepted"]
    (alone,) = [r for r in rows if r["batch"] == 1]
    joint = np.array(config["joint"])
    assert joint.sum() == 15 - sum(n for _, n in alone["steps"]) and joint[1:].sum() == len(alone["steps"])
    # one prompt, one seed at every B: the synthetic draws of a request do not depend on its batch-mates
    assert all(r["steps"] == alone["steps"] for r in rows)
    estimate = tmp_path / "lookup1.json"
    code, est_out, err = run_main(capsys, ["estimate", "--drafter", "lookup:1", "--workload", "edit", "--tokens", "16",
                                           "--new-tokens", "16", "--max-k", "3", "--no-timing", "--json"])
    assert code == 0, err
    estimate.write_text(est_out)
    result = tmp_path / "draft.json"
    code, stdout, err = run_main(capsys, [
        "llamacpp", "validate", "--costs", str(out), "--workloads", "edit", "--prompts", "1", "--temperatures", "0",
        "--repeats", "1", "--new-tokens", "16", "--grid", grid, "--draft", str(target), "--draft-gammas", "2",
        "--draft-p-min", "0,0.5", "--estimate", f"s={estimate}", "--no-advise", "--out", str(result)])
    assert code == 0, err
    v = strict_json(result.read_text())
    cells = {c["config"]: c for c in v["cells"]}
    row = cells[f"draft {target.stem} g2"]
    assert row["mean_draft"] == pytest.approx(2, abs=0.5) and row["tokens_per_step"] > 1.5  # its own drafts accepted
    assert 0 < row["predicted"] < 5 and 0 < cells["s"]["predicted_b"] < 5 and "pred (b)" in stdout
    assert 0 < cells[f"draft {target.stem} g2 p0.5"]["predicted"] < 5
    # the trace's draft lengths, read from the real server's log, agree with its own counters
    traced = [r for r in v["records"] if r["config"].startswith("draft")]
    assert traced and all(sum(r["lengths"]) == r["drafts"] and r["drafts"] > 0 and
                          sum(n * k for n, k in enumerate(r["lengths"])) == r["draft_tokens"] for r in traced)


def test_a_server_that_dies_mid_run_is_one_line_and_no_orphan(capsys, tmp_path) -> None:
    real = _binary()
    costs = tmp_path / "costs.json"
    costs.write_text('{"batch_timing": [{"batch_sizes": [1], "seconds": [[0.01, 0.02]], "context_tokens": 128}]}')
    dying = tmp_path / "llama-server"  # the real server, killed 4 s after it starts
    dying.write_text(f"#!/bin/sh\nexec timeout -s KILL 4 {real} \"$@\"\n")
    dying.chmod(dying.stat().st_mode | stat.S_IEXEC)
    result = tmp_path / "val.json"
    code, _, err = run_main(capsys, [
        "llamacpp", "validate", "--llama-server", str(dying), "--costs", str(costs), "--workloads", "chat,edit",
        "--prompts", "1", "--repeats", "3", "--new-tokens", "64", "--no-advise", "--out", str(result)])
    assert code == 1 and "did the server die?" in err and len(err.strip().splitlines()) == 1, err
    assert not result.exists() and not _servers()


def test_the_captured_cost_file_plans_and_prices() -> None:
    """tests/fixtures/llamacpp/costs-cpu-t1.json: `specdec llamacpp costs --batch-sizes 1,2 --repeats 2
    --contexts 128,512` on the 2-core EPYC (2026-11-26, -t 1), as written."""
    from specdec.strict_json import loads

    path = Path(__file__).parent / "fixtures" / "llamacpp" / "costs-cpu-t1.json"
    data = loads(path.read_text())
    costs = EngineCosts.from_file(data)
    assert costs.contexts == (235, 530) and 1.9 < costs.t(2, 235) / costs.t(1, 235) < 2.1
    assert [t.batch_sizes for t in read_batch_times(path)] == [(1, 2), (1, 2)]
    assert data["engine"]["commit"].startswith("0c1e570") and data["engine"]["threads"] == 1


def test_plan_prints_the_ngram_draft_length_flags(capsys) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "llamacpp"
    code, out, err = run_main(capsys, ["plan", "--from", str(fixtures / "metrics_ngram_simple.txt"), "--c", "0",
                                       "--batch-cost-file", str(fixtures / "costs-cpu-t1.json"), "--context", "300",
                                       "--json"])
    assert code == 0, err
    config = strict_json(out)["engine_config"]
    gamma = config["draft_max"]
    assert config["flags_ngram"] == ngram_flags(gamma) and gamma >= 1


def test_the_regret_has_a_paired_interval() -> None:
    """The advice's regret, best / advice - 1, with a bootstrap over the same (prompt, repeat) pairs:
    a rival 25 % faster on every request is a regret whose interval stays well above 0; a rival
    that is only noise around the advice gives an interval from 0 (the run cannot tell)."""
    from specdec.engines.llamacpp.advice import regret_interval

    rng = np.random.default_rng(1)
    rows = []
    for p in range(4):
        for r in range(3):
            plain = 2000 + 200 * p
            rows += [Record("none", 1.0, f"p{p}", "c", r, 97, plain, 90, 0, 0, 0),
                     Record("advice", 1.0, f"p{p}", "c", r, 97, plain / 1.2, 90, 0, 0, 0),
                     Record("fast", 1.0, f"p{p}", "c", r, 97, plain / 1.5, 90, 0, 0, 0),
                     Record("noise", 1.0, f"p{p}", "c", r, 97, plain / 1.2 * rng.uniform(0.95, 1.05), 90, 0, 0, 0)]
    lo, hi = regret_interval(rows, "advice", ["fast"])
    assert 0.2 < lo <= hi < 0.3
    lo, hi = regret_interval(rows, "advice", ["noise"])
    assert lo == 0.0 and 0 < hi < 0.06
    assert regret_interval(rows, "none", ["advice"])[0] == pytest.approx(0.2)  # "don't speculate": the advice at 1


def test_a_captured_p_min_run_is_priced_again_as_it_was(monkeypatch) -> None:
    """benchmarks/data/llamacpp/pmin-xeon/*-loop.json: a real llama-server's p-min grid (the Xeon,
    2026-11-28 02:04 UTC; records parsed from its counters and LLAMA_TRACE log, the cost file with the
    draft timed in the loop). Read back, every record's traced lengths add up to its counters, and
    predictions (a) and (b) computed again from the files equal what the run reported."""
    import json

    root = Path(__file__).resolve().parents[1]
    data = root / "benchmarks" / "data" / "llamacpp" / "pmin-xeon"
    run = json.loads((data / "validate-pmin-loop.json").read_text())
    monkeypatch.chdir(root)  # the files name the draft GGUF relative to the checkout, as the run did
    costs = EngineCosts.from_file(json.loads((data / "costs-pmin-loop.json").read_text()))
    assert costs.loops and costs.draft_parts(Path(".cache/drafts/d2-q8_0.gguf"), 200)[0] > 0
    configs = [from_flags(g["label"], g["flags"]) for g in run["grid"]]
    records = [Record(**r) for r in run["records"]]
    for r in records:
        if r.config.startswith("draft"):
            assert sum(r.lengths) == r.drafts and sum(n * k for k, n in enumerate(r.lengths)) == r.draft_tokens
    again = {c.config: c for c in cells(records, costs, 0, configs)}
    estimate = json.loads((data / "estimate-d2-top10-loop.json").read_text())
    for cell in run["cells"]:
        assert again[cell["config"]].predicted == pytest.approx(cell["predicted"], rel=1e-9)
        assert again[cell["config"]].measured == pytest.approx(cell["measured"], rel=1e-9)
        if cell.get("predicted_b") is not None:
            config = next(c for c in configs if c.label == cell["config"])
            rows = [r for r in records if r.config == config.label]
            found = category_estimates(estimate, config, data)
            assert predicted_b(config, rows, found, costs) == pytest.approx(cell["predicted_b"], rel=1e-9)
