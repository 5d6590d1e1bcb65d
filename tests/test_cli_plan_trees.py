"""`specdec plan-trees` (an alias of `specdec plan --trees`) on hand-written lattice studies: the
arithmetic of the best row, the drafter spec it prints, re-planning with another verify-cost
curve, cost files that state their kind, and one-line refusals."""
from __future__ import annotations

import json

import pytest

from tests.cli_helpers import run_main, strict_json

ROWS = [
    {"method": "base", "depth": 3, "block_efficiency": 1.5, "tree_tokens": 3.0, "choose_ms": 0.0, "options": {"p": 1}},
    {"method": "2-gram parallel p=4", "depth": 2, "block_efficiency": 1.9, "tree_tokens": 6.0, "choose_ms": 1.0,
     "options": {"p": 4, "rescorer": "2-gram", "w": 0.3}},
    {"method": "2-gram local", "depth": 3, "block_efficiency": 1.6, "tree_tokens": 3.0, "choose_ms": 0.5,
     "options": {"rescorer": "2-gram", "w": 0.3, "rescore": "local"}},
    {"method": "oracle top-2", "depth": 3, "block_efficiency": 2.5, "tree_tokens": None, "choose_ms": None,
     "options": None},
]


def study(tmp_path, **extra) -> str:
    data = {"heads_path": "H", "heads": 3, "k": 16, "by_depth": ROWS, "heads_pass_ms": 1.0,
            "rescorers": {"2-gram": ["ngram", "N2"]},
            "verify_step_ms": {"0": 10.0, "3": 14.0, "6": 30.0}} | extra
    path = tmp_path / "study.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_best_row_and_its_drafter(capsys, tmp_path) -> None:
    code, out, _ = run_main(capsys, ["plan-trees", study(tmp_path), "--json"])
    assert code == 0
    r = strict_json(out)
    best = r["best"]
    assert best["method"] == "2-gram local" and best["gamma"] == 3
    assert best["predicted_speedup"] == pytest.approx(1.6 * 10 / (14 + 1 + 0.5))
    assert best["drafter"] == "heads:H,k=16,ngram=N2,w=0.3,rescore=local"
    base = next(x for x in r["plan"] if x["method"] == "base")
    assert base["drafter"] == "heads:H" and base["predicted_speedup"] == pytest.approx(1.5 * 10 / (14 + 1))
    par = next(x for x in r["plan"] if x["method"].startswith("2-gram parallel"))
    assert par["drafter"] == "heads:H,k=16,p=4,ngram=N2,w=0.3" and par["gamma"] == 2
    code, out, _ = run_main(capsys, ["plan-trees", study(tmp_path)])
    assert code == 0 and "--drafter 'heads:H,k=16,ngram=N2,w=0.3,rescore=local' --gamma 3" in out


def test_another_machines_verify_cost_curve(capsys, tmp_path) -> None:
    """A flat curve (a GPU's) makes the 6-node trees cheap: the parallel drafts win."""
    cost = tmp_path / "gpu.json"
    cost.write_text(json.dumps({"verify_cost": [1.0] * 8, "cost": {"target_step_seconds": 0.005}}))
    code, out, _ = run_main(capsys, ["plan-trees", study(tmp_path), "--verify-cost-file", str(cost),
                                     "--draft-ms", "0.2", "--json"])
    assert code == 0
    best = strict_json(out)["best"]
    assert best["method"] == "2-gram parallel p=4"
    assert best["predicted_speedup"] == pytest.approx(1.9 * 5 / (5 + 0.2 + 1.0))


@pytest.mark.parametrize("make, extra, option", [
    (lambda p: p.write_text("[1, 2]"), [], "STUDY"),
    (lambda p: p.write_text("{not json"), [], "STUDY"),
    (lambda p: p.write_text(json.dumps({"block_efficiency": []})), [], "STUDY"),
    (None, ["--draft-ms", "-1"], "--draft-ms"),
])
def test_refusals(capsys, tmp_path, make, extra, option) -> None:
    path = study(tmp_path)
    if make is not None:
        from pathlib import Path
        make(Path(path))
    code, out, err = run_main(capsys, ["plan-trees", path, *extra])
    assert code == 2 and option in err and len(err.strip().splitlines()) == 1


def test_refuses_a_cost_file_without_step_time(capsys, tmp_path) -> None:
    cost = tmp_path / "cost.json"
    cost.write_text(json.dumps({"verify_cost": [1.0, 1.1]}))
    code, out, err = run_main(capsys, ["plan-trees", study(tmp_path), "--verify-cost-file", str(cost)])
    assert code == 2 and "--verify-cost-file" in err and "target_step_seconds" in err
    code, out, err = run_main(capsys, ["plan-trees", study(tmp_path, verify_step_ms=None)])
    assert code == 2 and "--no-timing" in err


def test_cost_file_with_timed_tree_steps(capsys, tmp_path) -> None:
    """benchmarks/bench_costs.py output: its directly timed tree verify steps win over its curve."""
    cost = tmp_path / "costs.json"
    cost.write_text(json.dumps({"verify_cost": [1.0, 9.0], "cost": {"target_step_seconds": 0.005},
                                "verify_step_ms": {"0": 5.0, "8": 5.0}, "device_name": "GPU X"}))
    code, out, _ = run_main(capsys, ["plan-trees", study(tmp_path), "--verify-cost-file", str(cost), "--draft-ms", "0",
                                     "--json"])
    assert code == 0
    r = strict_json(out)
    assert "GPU X" in r["verify_steps"] and r["best"]["method"] == "2-gram parallel p=4"
    assert r["best"]["predicted_speedup"] == pytest.approx(1.9 * 5 / (5 + 1.0))


@pytest.mark.parametrize("extra", [[], ["--json"], ["--verify-cost-file", "GPU", "--draft-ms", "0.2"],
                                   ["--verify-cost-file", "GPU", "--json"]])
def test_plan_trees_is_plan_with_trees(capsys, tmp_path, extra) -> None:
    """`specdec plan-trees STUDY` is an alias of `specdec plan --trees STUDY`: the same output."""
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps({"kind": "specdec.estimate", "verify_cost": [1.0] * 8,
                               "cost": {"target_step_seconds": 0.005}}))
    extra = [str(gpu) if a == "GPU" else a for a in extra]
    path = study(tmp_path)
    alias = run_main(capsys, ["plan-trees", path, *extra])
    direct = run_main(capsys, ["plan", "--trees", path, *extra])
    assert alias == direct and alias[0] == 0 and alias[1]


def test_kinds_through_the_command(capsys, tmp_path) -> None:
    """A study and a tree-costs file that say their kind are read; a file of the wrong kind is refused."""
    cost = tmp_path / "costs.json"
    cost.write_text(json.dumps({"kind": "specdec.tree-costs", "verify_step_ms": {"0": 5.0, "8": 5.0},
                                "device_name": "GPU X"}))
    path = study(tmp_path, kind="specdec.lattice-study")
    code, out, _ = run_main(capsys, ["plan", "--trees", path, "--verify-cost-file", str(cost), "--draft-ms", "0",
                                     "--json"])
    assert code == 0 and strict_json(out)["best"]["method"] == "2-gram parallel p=4"
    for argv, option in ((["plan", "--trees", str(cost)], "--trees"), (["plan-trees", str(cost)], "STUDY"),
                         (["plan", "--trees", path, "--verify-cost-file", path], "--verify-cost-file")):
        code, out, err = run_main(capsys, argv)
        assert code == 2 and option in err and len(err.strip().splitlines()) == 1
        assert "not a" in err, err


@pytest.mark.parametrize("argv, words", [
    (["--trees", "STUDY", "--alpha", "0.5"], ["--trees", "--alpha"]),
    (["--trees", "STUDY", "--c", "0", "--engine", "vllm"], ["--c", "--engine"]),
    (["--alpha", "0.5", "--c", "0", "--draft-ms", "1"], ["--draft-ms", "--trees"]),
])
def test_trees_refuses_other_plans_options(capsys, tmp_path, argv, words) -> None:
    path = study(tmp_path)
    code, out, err = run_main(capsys, ["plan", *[path if a == "STUDY" else a for a in argv]])
    assert code == 2 and all(w in err for w in words) and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("change", [
    lambda d: d["by_depth"][0].update(block_efficiency=float("nan")),
    lambda d: d["by_depth"][1].update(block_efficiency=-3.0),
    lambda d: d["by_depth"][1].update(choose_ms=-1.0),
    lambda d: d["by_depth"][1]["options"].update(w=float("inf")),
    lambda d: d.update(k="sixteen"),
    lambda d: d.update(heads_pass_ms=float("nan")),
    lambda d: d["verify_step_ms"].update({"3": -14.0}),
    lambda d: d["verify_step_ms"].update({"6": float("nan")}),
], ids=["nan-efficiency", "negative-efficiency", "negative-choose", "inf-weight", "k-word", "nan-heads-ms",
        "negative-verify", "nan-verify"])
def test_no_plan_from_a_bad_number(capsys, tmp_path, change) -> None:
    """Issue 28: a NaN or negative number in a study is one line naming the file, never a
    'best' configuration with a command to paste."""
    path = study(tmp_path)
    data = json.loads(open(path).read())
    change(data)
    open(path, "w").write(json.dumps(data))  # json writes NaN / Infinity literals, as a careless tool would
    code, out, err = run_main(capsys, ["plan-trees", path])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "study.json" in err, err
