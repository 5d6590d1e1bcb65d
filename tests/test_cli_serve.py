"""`specdec serve-bench` end to end on the saved tiny pair (fast), and its refusals before any
model loads (one line naming the option, exit 2)."""
from __future__ import annotations

import numpy as np
import pytest

from specdec.simulator.ragged import draft_pass_seconds, longest_proposal
from tests.cli_helpers import run_main, strict_json


def test_serve_bench_writes_tables_json_and_figure(tiny_pair, tmp_path, capsys) -> None:
    out = tmp_path / "serve"
    code, stdout, err = run_main(capsys, ["serve-bench", "--target", str(tiny_pair.target), "--drafter", "lookup:2",
                                          "--drafter", f"tiny=model:{tiny_pair.draft}", "--gammas", "1,3",
                                          "--batch-sizes", "1,3", "--contexts", "8,24", "--new-tokens", "6",
                                          "--prompts", "3", "--timing-repeats", "1", "--out", str(out), "--json"])
    assert code == 0, err
    d = strict_json(stdout)
    assert strict_json((out / "serve.json").read_text()) == d
    assert (out / "serve.png").stat().st_size > 0 and "speculation stops paying" in (out / "serve.md").read_text()
    assert [c["context"] for c in d["contexts"]] == [8, 24]
    for ctx in d["contexts"]:
        assert ctx["timing"]["batch_sizes"] == [1, 3] and len(ctx["timing"]["seconds"][0]) == 4
        names = [m["method"] for m in ctx["methods"]]
        assert names == ["baseline", "lookup:2 gamma=1", "lookup:2 gamma=3", "tiny gamma=1", "tiny gamma=3"]
        for m in ctx["methods"]:
            for p in m["points"]:
                assert p["throughput"] > 0 and p["latency_p50"] <= p["latency_p99"]
                assert "predicted_p50" in p and "predicted_p99" not in p  # no tail the model cannot predict
                assert p["tokens"] >= max(p["batch"], 3) * 6 * 2  # two blocks, every slot busy to the budget
            if m["method"] == "baseline":
                assert all(p["speedup"] == 1.0 and p["predicted_speedup"] == 1.0 for p in m["points"])
            # the draft model drafts every row in one forward: its pass's drafting is d(B) from its timed
            # t_d(B, 1..2) and the smallest batch's law (simulator.ragged.draft_pass_seconds), beside the measured
            steps = ctx["draft_step_seconds"]
            assert list(steps) == ["tiny"] and all(len(s) == 2 and min(s) > 0 for s in steps["tiny"].values())
            first = m["points"][0]
            forwards = [draft_pass_seconds(first["joint"], p["batch"], steps["tiny"][str(p["batch"])])
                        for p in m["points"]]
            looks = [longest_proposal(first["joint"], p["batch"]) for p in m["points"]]
            around = max(first["draft_pass_seconds"] - forwards[0], 0.0) / looks[0] if looks[0] else 0.0  # at B = 1
            for p, f, n in zip(m["points"], forwards, looks):
                expected = f + around * n if m["method"].startswith("tiny") else 0.0
                assert p["predicted_draft_seconds"] == pytest.approx(expected)
                assert p["draft_pass_seconds"] > 0 or m["method"] == "baseline"
            low, high = m["crossover_range"] if m["method"] != "baseline" else (None, None)
            assert (low is None or m["crossover"] is None or low <= m["crossover"]) and (high is None or low <= high)
        text = (out / "serve.md").read_text()
        assert "Draft model tiny, one step of every row" in text and "drafting a pass, measured ms" in text
        assert "where the 95 % intervals let it lie" in text


@pytest.mark.parametrize("args, option", [
    (["--drafter", "none"], "--drafter"),
    (["--drafter", "lookup", "--batch-sizes", "4,2"], "--batch-sizes"),
    (["--drafter", "lookup", "--contexts", "100000"], "--contexts"),
    (["--drafter", "lookup", "--blocks", "1"], "--blocks"),
    (["--drafter", "lookup", "--layout", "diagonal"], "--layout"),
    (["--drafter", "lookup", "--slo-ms", "0"], "--slo-ms"),
    (["--drafter", "a=lookup", "--drafter", "a=lookup:2"], "--drafter"),
])
def test_refusals_name_the_option(capsys, args, option) -> None:
    code, _, err = run_main(capsys, ["serve-bench", *args])
    assert code == 2 and option in err and len(err.strip().splitlines()) <= 3, err


def test_a_draft_models_step_is_timed_before_every_block(tiny_pair, tmp_path, capsys, monkeypatch) -> None:
    """t(B, k) and t_d(B, 1..2) are timed before each block of that B's decodes and the median over the blocks
    kept (the machine drifts within a run): each draft-step timing here answers its own call count."""
    import specdec.reference.measure.serving as serving

    real, calls = serving.time_batched_passes, []

    def counted(model, tokens, batch_sizes, *args, draft_step=False, **kwargs):
        timing = real(model, tokens, batch_sizes, *args, draft_step=draft_step, **kwargs)
        if draft_step:
            calls.append(list(batch_sizes))
            timing.seconds = [[len(calls) * 1e-3, len(calls) * 2e-3]]
        return timing

    monkeypatch.setattr(serving, "time_batched_passes", counted)
    code, stdout, err = run_main(capsys, ["serve-bench", "--target", str(tiny_pair.target),
                                          "--drafter", f"tiny=model:{tiny_pair.draft}", "--gammas", "1",
                                          "--batch-sizes", "1,2", "--contexts", "8", "--new-tokens", "4",
                                          "--prompts", "2", "--blocks", "3", "--timing-repeats", "1",
                                          "--out", str(tmp_path / "serve"), "--json"])
    assert code == 0, err
    assert calls == [[1]] * 3 + [[2]] * 3  # three blocks at each B, each timed just before its block
    ctx = strict_json(stdout)["contexts"][0]
    assert ctx["draft_step_seconds"]["tiny"] == {"1": pytest.approx([2e-3, 4e-3]),
                                                 "2": pytest.approx([5e-3, 10e-3])}  # medians of calls 1-3, 4-6
    assert [len(ctx["timing_blocks"][b]) for b in ("1", "2")] == [3, 3]  # the target's t(B, k) likewise
    assert ctx["timing"]["seconds"][1] == pytest.approx(np.median(ctx["timing_blocks"]["2"], axis=0).tolist())
    assert sum(ctx["draft_step_blocks"]["tiny"]["2"], []) == pytest.approx([4e-3, 8e-3, 5e-3, 10e-3, 6e-3, 12e-3])
