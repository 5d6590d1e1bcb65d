"""B clients out of phase (`specdec llamacpp validate --batch-sizes ... --arrivals streams`,
engines/llamacpp/streams.py): each stream's requests are the waves' (so the two checks pair
request for request), a restored slot decodes its request without a prompt pass (the real
server's own timings say so), and a real run is measured and predicted like the waves, every
request evaluating one prompt token and drafting what it drafts alone. Real-server tests are skipped only when llama-server is not built."""
from __future__ import annotations

import pytest

from specdec.engines.llamacpp.batches import waves
from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, default_model
from specdec.engines.llamacpp.streams import design, lead_in, stream_requests
from specdec.engines.llamacpp.validation import Request, send
from tests.cli_helpers import run_main, strict_json
from tests.test_engines_llamacpp_loop import _binary, no_new_servers  # noqa: F401 (the fixture)


@pytest.mark.parametrize("n, B", [(8, 1), (8, 2), (8, 4), (8, 8), (3, 2), (1, 2), (5, 4)])
def test_the_streams_run_the_waves_requests(n, B) -> None:
    """Request k of a round is stream k mod B's (k // B-th), the waves' slot k mod B of wave k // B:
    the same requests, so a stream's record pairs with no speculation's, and with a wave's."""
    for repeat in range(3):
        by_wave = [j for w in waves(n, B, repeat) for j in w]
        ks = sorted(k for i in range(B) for k in stream_requests(n, B, i))
        assert ks == list(range(len(by_wave)))
        assert all(k % B == i for i in range(B) for k in stream_requests(n, B, i))
        assert [(k + repeat) % n for k in ks] == by_wave
    assert [lead_in(B, i, 96) for i in range(B)] == [round(96 * i / B) for i in range(B)] and lead_in(B, 0, 96) == 0


def test_a_restored_prompt_decodes_without_a_prompt_pass(tmp_path) -> None:
    """A prompt's KV cache saved from slot 0 and restored into slot 1: the request there evaluates
    one prompt token (the rest cached) and decodes what slot 0 decodes from its own cache (T = 0)."""
    binary = _binary()
    config = ServerConfig(default_model(), ctx_size=2048, parallel=2, extra=("--slot-save-path", str(tmp_path)))
    request = Request("p", "edit", "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog.", True)
    with LlamaServer(config, binary) as server:
        client = Client(server.url)
        fresh = send(client, request, 16, 0.0, 0, id_slot=0, cache_prompt=True)
        assert int(fresh.timings["prompt_n"]) > 20
        client.slot_action(0, "save", "p.bin")
        cached = send(client, request, 16, 0.0, 0, id_slot=0, cache_prompt=True)
        client.slot_action(1, "restore", "p.bin")
        restored = send(client, request, 16, 0.0, 0, id_slot=1, cache_prompt=True)
    assert int(restored.timings["prompt_n"]) == 1 == int(cached.timings["prompt_n"])
    assert int(restored.timings["cache_n"]) == int(fresh.timings["prompt_n"]) - 1
    assert restored.text == cached.text


def test_streams_on_a_real_server(capsys, tmp_path) -> None:
    """B = 1, 2 streams of two edit prompts: every request decoded once per B after a restore (one
    prompt token evaluated), the joint from B = 1's traced steps, the records keyed as the waves'."""
    _binary()
    costs = tmp_path / "costs.json"
    code, _, err = run_main(capsys, ["llamacpp", "costs", "--k", "1,2,3", "--batch-sizes", "1,2", "--contexts", "128",
                                     "--repeats", "1", "--new-tokens", "16", "--out", str(costs)])
    assert code == 0, err
    grid = "s=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 2 --spec-synth-rates 0.9,0.81"
    out = tmp_path / "streams.json"
    code, stdout, err = run_main(capsys, ["llamacpp", "validate", "--costs", str(costs), "--batch-sizes", "1,2",
                                          "--arrivals", "streams", "--workloads", "edit", "--prompts", "2",
                                          "--temperatures", "0", "--repeats", "1", "--new-tokens", "16", "--grid",
                                          grid, "--out", str(out)])
    assert code == 0, err
    result = strict_json(out.read_text())
    assert result["arrivals"] == "streams" and "B=2" in stdout
    assert {k: result[k] for k in design()} == design()  # the replay rebuilds the round from it
    (at,) = result["temperatures"]
    (config,) = at["configs"]
    assert [p["batch"] for p in config["points"]] == [1, 2]
    assert all(p["pairs"] == 2 and 0.2 < p["predicted"] < 5 and p["tokens_per_step"] > 1 for p in config["points"])
    rows = at["records"]
    assert len(rows) == 2 * 2 * 2 and all(r["own_counts"] and r["tokens"] == 16 for r in rows)
    assert all(r["prompt_evaluated"] == 1 and r["idle_ms"] > 0 for r in rows)
    assert all(p["prompt_passes"] == 0 and 0 < p["idle_share"] < 0.5 for p in config["points"])
    prompts = sorted({r["prompt"] for r in rows})
    for B in (1, 2):
        for label in ("none", "s"):
            mine = [r for r in rows if (r["batch"], r["config"]) == (B, label)]
            assert sorted(r["prompt"] for r in mine) == prompts
            assert sorted((r["wave"], r["slot"]) for r in mine) == sorted((k // B, k % B) for k in range(2))
    alone = [r for r in rows if r["batch"] == 1 and r["config"] == "s"]
    assert all(len(r["steps"]) == r["drafts"] > 0 and sum(n for _, n in r["steps"]) == r["accepted"] for r in alone)
    assert sum(sum(row) for row in config["joint"]) == sum(15 - r["accepted"] for r in alone)
    # at B = 2 each request's own timings give its accepted tokens; a synthetic draw is the request's (its seed)
    paired = {r["prompt"]: r["accepted"] for r in alone}
    assert all(r["accepted"] == paired[r["prompt"]] for r in rows if r["batch"] == 2 and r["config"] == "s")


def test_streams_need_batch_sizes_from_one(capsys, tmp_path) -> None:
    costs = tmp_path / "c.json"
    costs.write_text('{"batch_timing": [{"batch_sizes": [1, 2], "seconds": [[0.01, 0.02], [0.02, 0.03]], '
                     '"context_tokens": 128}]}')
    for argv in (["--batch-sizes", "2", "--arrivals", "streams"], ["--arrivals", "streams"]):
        code, out, err = run_main(capsys, ["llamacpp", "validate", "--costs", str(costs), "--out",
                                           str(tmp_path / "x.json"), *argv])
        assert code == 2 and "--arrivals" in err and len(err.strip().splitlines()) == 1


def test_the_epyc_check_is_priced_by_its_servers_mixed_steps() -> None:
    """A real llama-server's cost file with mixed steps (`specdec llamacpp costs --mixed-k 5`, the EPYC
    at f32, 2026-11-29 run 4) priced against the B-client check it preceded (streams, B = 1, 2, 4, 8):
    every point within 10 % and both crossovers; the same file's t(B, k) alone misses ngram-simple's
    B = 2 by more than 10 % (a (5, 1) step priced as two standalone steps where the server runs it as
    cheaply as (5, 5): docs/engines.md, "What a micro-batch costs depends on the server")."""
    import json
    from pathlib import Path

    from specdec.engines.llamacpp.batches import BatchRecord, points

    run = Path(__file__).parent.parent / "benchmarks/data/llamacpp/batches/streams/epyc/run4"
    check = json.loads((run / "batches-f32-streams.json").read_text())
    costs = json.loads((run / "costs-b1248-f32.json").read_text())
    records = [BatchRecord(**r) for r in check["temperatures"][0]["records"]]
    accept = max(0.0, costs["accept_seconds"])
    priced = points(records, costs, accept, check["seed"])
    assert all(p["priced_by"] == "mixed steps" and abs(p["error"]) < 0.10 for c in priced for p in c["points"])
    assert all(c["crossover"] == c["predicted_crossover"] for c in priced)
    for table in costs["batch_timing"]:
        del table["mixed"]
    alone = {c["config"]: c["points"] for c in points(records, costs, accept, check["seed"])}
    assert alone["ngram-simple g4"][1]["batch"] == 2 and alone["ngram-simple g4"][1]["error"] < -0.10


def test_the_plan_from_the_epyc_checks_b1_counts_prices_its_batches(capsys, tmp_path) -> None:
    """`plan --from` the /metrics page of the run-4 check's B = 1 requests, with its real cost file
    (the mixed steps by today's rule: `*-mixed-recomputed.json`): the batch table's gamma = 4 column,
    priced by the speculating servers' own steps, is within 10 % of the speedup the engine measured at
    every B for both configurations; from t(B, k) alone ngram-simple's B = 2 misses by more than 10 %."""
    import json
    from pathlib import Path

    from specdec.engines.llamacpp.batches import BatchRecord, heads
    from specdec.engines.llamacpp.validation import metrics_page

    run = Path(__file__).parent.parent / "benchmarks/data/llamacpp/batches/streams/epyc/run4"
    (at,) = json.loads((run / "batches-f32-streams.json").read_text())["temperatures"]
    costs = json.loads((run / "costs-b1248-f32-mixed-recomputed.json").read_text())
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps(costs | {"batch_timing": [{k: v for k, v in t.items() if k != "mixed"}
                                                          for t in costs["batch_timing"]]}))
    records = [BatchRecord(**r) for r in at["records"]]
    errors = {}
    for c in at["configs"]:
        page = tmp_path / "page.txt"
        page.write_text(metrics_page(heads([r for r in records if r.config == c["config"] and r.batch == 1])))
        for name, path in (("mixed", run / "costs-b1248-f32-mixed-recomputed.json"), ("alone", alone)):
            code, out, err = run_main(capsys, ["plan", "--from", str(page), "--c", "0", "--batch-cost-file", str(path),
                                               "--context", str(round(c["context"])), "--json"])
            assert code == 0, err
            batch = strict_json(out)["batch"]
            assert batch["mixed_k"] == ([5] if name == "mixed" else []) and batch["gammas"][-1] == 4
            assert batch["batch_sizes"] == [p["batch"] for p in c["points"]]
            errors[c["config"], name] = [row[4] / p["measured"] - 1 for row, p in zip(batch["speedup"], c["points"])]
    assert all(abs(e) < 0.10 for (_, name), row in errors.items() if name == "mixed" for e in row), errors
    assert errors["ngram-simple g4", "alone"][1] < -0.10


def test_the_q4_1_check_is_priced_by_mixed_steps_at_every_draft_length() -> None:
    """The default target's own Q4_1 GGUF on the EPYC (2026-11-29 run 6: `MIXED_K=2,3,4,5`, ngram-simple
    at draft lengths 4 and 2, synthetic, T = 0 and 1, streams): the cost file's mixed steps cover every
    draft length the plan compares, and the check's 24 points, each priced by the mixed steps of its own
    draft length, lie within 10 % of what the engine measured."""
    import json
    from pathlib import Path

    from specdec.costfiles import read_batch_times
    from specdec.engines.llamacpp.batches import BatchRecord, points

    run = Path(__file__).parent.parent / "benchmarks/data/llamacpp/batches/streams/epyc/run6-q4_1"
    check = json.loads((run / "batches-q4_1-streams.json").read_text())
    costs = json.loads((run / "costs-b1248-q4_1.json").read_text())
    assert all(sorted(t.mixed_steps()) == [2, 3, 4, 5] for t in read_batch_times(run / "costs-b1248-q4_1.json"))
    priced = [p for at in check["temperatures"] for c in points([BatchRecord(**r) for r in at["records"]], costs,
                                                                max(0.0, costs["accept_seconds"]), check["seed"])
              for p in c["points"]]
    assert len(priced) == 24 and all(p["priced_by"] == "mixed steps" for p in priced)
    assert all(abs(p["error"]) < 0.10 for p in priced), [round(p["error"], 3) for p in priced]
