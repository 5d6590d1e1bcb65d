"""specdec.report renders each plan type: its JSON values are strict JSON and hold the plan's
numbers, and its text shows them (the command-line tests check the texts of real commands)."""
from __future__ import annotations

import json

import pytest

from specdec.report import (TREE_ROWS, drafter_spec, engine_config_lines, engine_plan_dict, engine_plan_text,
                            plan_dict, plan_text, tree_plan_dict, tree_plan_text, tree_rows, tree_table)
from specdec.simulator.batch import BatchTimes
from specdec.simulator.counts import Acceptance
from specdec.simulator.engine_plan import engine_plan
from specdec.simulator.plan import make_plan
from specdec.simulator.trees import plan_trees

ACCEPTANCE = Acceptance((0.8, 0.75, 0.6), ((0.77, 0.83), (0.72, 0.78), (0.56, 0.64)), "per-position counts", 3,
                        {"accepted": [800, 600, 360], "reached": [1000, 800, 600], "drafts": 1000})
TIMES = BatchTimes((1, 8), ((0.010, 0.0105, 0.011, 0.0115), (0.012, 0.018, 0.024, 0.030)), "cpu", 128)
STUDY = {"heads_path": "H", "k": 16, "rescorers": {"2-gram": ["ngram", "N2"]}, "by_depth": [
    {"method": "base", "depth": 3, "block_efficiency": 1.5, "tree_tokens": 3.0, "choose_ms": 0.0, "options": {"p": 1}},
    {"method": "2-gram parallel p=4", "depth": 2, "block_efficiency": 1.9, "tree_tokens": 6.0, "choose_ms": 1.0,
     "options": {"p": 4, "rescorer": "2-gram", "w": 0.3}},
    {"method": "oracle top-2", "depth": 3, "block_efficiency": 2.5, "tree_tokens": None, "choose_ms": None}]}


def strict(value) -> dict:
    return json.loads(json.dumps(value, allow_nan=False))


def test_plan() -> None:
    plan = make_plan(c=0.05, alpha=0.8)
    d = strict(plan_dict(plan))
    assert d["gamma"] == d["optimal_gamma"] == 8 and d["table"][8]["speedup"] == d["speedup"] == d["optimal_speedup"]
    assert d["oracle"]["expected_tokens"] == pytest.approx(5.0) and len(d["table"]) == plan.gammas.size
    text = plan_text(plan).splitlines()
    assert text[0] == "alpha = 0.8 (i.i.d.), c = 0.05, c_hat = 0.05, verify cost v(k) = 1 (paper)"
    assert [line.split()[0] for line in text if line.endswith("<- best")] == ["8"] and text[-1].split()[0] == "11"


def test_engine_plan_with_batches_and_configuration() -> None:
    from specdec.engines.configs import engine_config

    plan = engine_plan(ACCEPTANCE, 0.0, "vllm-prometheus", batch_times=TIMES)
    config = engine_config(plan, "vllm")
    d = strict(engine_plan_dict(plan, config, "batch.png"))
    assert list(d) == ["source", "acceptance", "plan", "positions_observed", "extrapolated", "verify_cost_source",
                       "draft_share", "batch", "engine_config", "figure"]
    assert d["acceptance"]["alpha_per_position_ci"] == [[0.77, 0.83], [0.72, 0.78], [0.56, 0.64]]
    assert d["plan"]["verify_cost"] == pytest.approx([1.0, 1.05, 1.1, 1.15])  # t(1, k) / t(1, 1)
    ranges = d["batch"]["ranges"]
    assert d["batch"]["batch_sizes"] == [1, 8] and ranges[0][0] == 1 and ranges[-1][1] == 8
    assert d["batch"]["best_gamma"] == plan.best_batch_gamma() and not any(r["extrapolated"] for r in d["plan"]["table"])
    text = engine_plan_text(plan, config, "batch.png")
    assert "alpha_i (95% CI): 1: 0.800 [0.770, 0.830]" in text and "from the batch cost file" in text
    assert "speedup by batch size (t(B, k) measured on cpu at 128 tokens of context):" in text
    assert "vLLM: --speculative-config '" in text and text.endswith("figure: batch.png")


def test_extrapolated_rows_are_flagged() -> None:
    d = engine_plan_dict(engine_plan(ACCEPTANCE, 0.0, "x", max_gamma=5, extrapolate=True))
    assert d["extrapolated"] and [r["extrapolated"] for r in d["plan"]["table"]] == [False] * 4 + [True] * 2
    assert "extrapolated: alpha_i beyond" in engine_plan_text(engine_plan(ACCEPTANCE, 0.0, "x", 5, True))


@pytest.mark.parametrize("config, line", [
    ({"engine": "vllm", "speculate": False, "note": "leave it off"}, "vllm: leave it off"),
    ({"engine": "llamacpp", "speculate": True, "flags": "--spec-draft-n-max 3", "flags_older": "--draft-max 3",
      "note": None}, "llama.cpp: --spec-draft-n-max 3   (builds before 2026: --draft-max 3)"),
    ({"engine": "sglang", "speculate": True, "flags": "--speculative-algorithm NGRAM", "note": None},
     "SGLang: --speculative-algorithm NGRAM"),
    ({"engine": "hf", "speculate": True, "generate_kwargs": {"prompt_lookup_num_tokens": 3}},
     "transformers generate(..., prompt_lookup_num_tokens=3)"),
])
def test_engine_configuration_lines(config, line) -> None:
    assert engine_config_lines(config) == [line]


def test_tree_plan() -> None:
    tree = plan_trees(STUDY["by_depth"], {0: 0.010, 3: 0.014}, 0.001, skip_larger=True)
    assert tree.skipped_larger_trees == 1 and tree.largest_timed == 3
    d = strict(tree_plan_dict(tree, STUDY, "study.json", "the study's steps", 1.0))
    assert d["best"] == d["plan"][0] and d["best"]["drafter"] == "heads:H" and d["best"]["gamma"] == 3
    assert d["best"]["predicted_speedup"] == pytest.approx(1.5 * 10 / (14 + 1))
    assert drafter_spec(STUDY, "2-gram parallel p=4") == "heads:H,k=16,p=4,ngram=N2,w=0.3"
    text = tree_plan_text(tree, STUDY, "study.json", "the study's steps", 1.0)
    assert "1 rows with trees larger than the timed 3 nodes skipped" in text
    assert "| base | 3 | 1.500 | 3.0 | 15.0 | 1.000x |" in text and "do not speculate" in text
    rows = tree_rows(tree) * (TREE_ROWS + 5)
    assert len(tree_table(rows).splitlines()) == 2 + TREE_ROWS


def test_no_tree_fits() -> None:
    tree = plan_trees(STUDY["by_depth"][1:], {0: 0.010, 3: 0.014}, 0.0, skip_larger=True)
    assert tree.best is None
    assert tree_plan_dict(tree, STUDY, "s", "v", 0.0)["best"] is None
    assert tree_plan_text(tree, STUDY, "s", "v", 0.0).endswith("no method of the study fits the verify-cost curve")
