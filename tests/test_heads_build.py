"""Heads on the real default target, SmolLM2-135M-Instruct (slow: loads it and trains).

The real `specdec heads train` on a small budget (corpus text only, 20 windows of 64 tokens,
1 epoch; the demo's budget is `scripts/main_job.sh`'s), then: the card names this target;
its greedy speculative output with the heads (fast backend, gamma 1..3) equals the target's
own greedy output on a held-out prompt; `heads eval` and `estimate` report per-head figures.
"""
from __future__ import annotations

import json

import pytest

from tests.cli_helpers import run_main, strict_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def heads_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("heads") / "small"
    from specdec.cli import main
    try:
        main(["heads", "train", "--out", str(out), "--tokens", str(20 * 64), "--window", "64",
              "--aligned-tokens", "0", "--epochs", "1", "--json"])
    except SystemExit as exc:
        assert exc.code in (0, None)
    assert (out / "card.json").is_file()
    return out


def test_card_and_greedy_equivalence(heads_dir, capsys) -> None:
    from specdec.reference.heads.store import weights_fingerprint
    from specdec.reference.data.default_model import default_target_path

    card = json.loads((heads_dir / "card.json").read_text())
    assert card["target"]["weights_sha256"] == weights_fingerprint(default_target_path())
    assert card["n_heads"] == 3 and len(card["held_out"]) == 3
    prompt = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, "
              "must be in want of a wife.")
    for gamma in (1, 2, 3):
        code, out, _ = run_main(capsys, ["decode", "--prompt", prompt, "--drafter", f"heads:{heads_dir}",
                                         "--gamma", str(gamma), "--temperature", "0", "--max-new-tokens", "32",
                                         "--baseline", "--json"])
        assert code == 0
        r = strict_json(out)
        assert r["baseline"]["same_tokens"] is True, gamma  # the target's own greedy decode, same prompt
        assert r["stats"]["drafted"] > 0


def test_eval_and_estimate_report_every_head(heads_dir, capsys) -> None:
    code, out, _ = run_main(capsys, ["heads", "eval", str(heads_dir), "--windows", "2", "--window", "64", "--json"])
    assert code == 0
    d = strict_json(out)
    assert len(d["mean_entropy"]) == 4 and len(d["top1"]) == 3 and 1 <= d["h_max"] <= 4
    code, out, _ = run_main(capsys, ["estimate", "--drafter", f"heads:{heads_dir}", "--temperature", "1",
                                     "--tokens", "128", "--no-timing", "--json"])
    assert code == 0
    r = strict_json(out)
    assert len(r["alpha_per_position"]) == 3 and r["alpha_per_position"][0] == pytest.approx(r["alpha"])


def test_lattice_study_plan_and_the_planned_drafter(heads_dir, tmp_path, capsys) -> None:
    """`heads lattice` with the target itself as a local LM rescorer, then `plan-trees` on the saved
    study, then the planned drafter decodes the target's own greedy text."""
    from specdec.reference.data.default_model import default_target_path

    saved = tmp_path / "study.json"
    code, out, _ = run_main(capsys, ["heads", "lattice", str(heads_dir), "--lm", f"self={default_target_path()}",
                                     "--prompts", "3", "--tune", "1", "--new-tokens", "12", "--k", "4", "--p", "1,2",
                                     "--oracle-k", "2,4", "--save", str(saved), "--json"])
    assert code == 0
    r = strict_json(out)
    eff = {row["method"]: row["block_efficiency"] for row in r["block_efficiency"]}
    assert {"base", "parallel base p=2", "self local", "oracle top-4"} <= set(eff)
    assert eff["oracle top-4"] >= max(eff.values()) - 1e-12
    assert [row["k"] for row in r["oracle_curve"]] == [1, 2, 3, 4]
    assert r["oracle_curve"][-1]["block_efficiency"] == pytest.approx(eff["oracle top-4"])
    assert {row["depth"] for row in r["by_depth"]} == {1, 2, 3}
    code, out, _ = run_main(capsys, ["plan-trees", str(saved), "--json"])
    assert code == 0
    plan = strict_json(out)
    for row in plan["plan"][:2]:
        code, out, err = run_main(capsys, ["decode", "--prompt", "Once upon a time", "--drafter", row["drafter"],
                                           "--gamma", str(row["gamma"]), "--temperature", "0", "--max-new-tokens", "16",
                                           "--baseline", "--json"])
        assert code == 0, (row["drafter"], err)
        assert strict_json(out)["baseline"]["same_tokens"] is True, row["drafter"]


def test_answers_to_a_held_out_prompt_are_not_trained_on() -> None:
    """A prompt asked twice (a small workload split, cycled): its other answers leave the
    training windows when one of its answers is held out; corpus windows always train."""
    from specdec.reference.heads.build import split_held_out

    sampled = [[1], [2], [3], [4], [5]]
    asked = [(7,), (8,), (7,), (9,), (8,)]
    held, train, left_out = split_held_out(sampled, asked, [[10], [11]], held_out=1)
    assert held == [[1]] and train == [[2], [4], [5], [10], [11]] and left_out == 1
    held, train, left_out = split_held_out(sampled, asked, [[10], [11]], held_out=2)
    assert held == [[1], [2]] and train == [[4], [10], [11]] and left_out == 2
    held, train, left_out = split_held_out(sampled[:1], asked[:1], [[10], [11], [12]], held_out=2)
    assert held == [[10], [11]] and train == [[12], [1]] and left_out == 0  # too few samples: corpus held out
