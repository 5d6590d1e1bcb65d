"""Property tests of the input boundary (issue 28), with hypothesis and its shrinking: drafter
specs from the grammar's own pieces, and engine outputs, lattice studies and cost files
mutated from valid ones (a value swapped for a hostile one: NaN's JSON stand-ins, 1e308,
negative, fractional, a string, null, a list, deep nesting, a huge digit run). Property: the
real command line (in process) exits 0 or 2; an exit 2 is one `Error:` line naming an option
or argument; a plan printed is strict JSON whose speedups are finite, positive and within
tokens per iteration. A spec parses or is refused with one `SpecdecError`, never another
exception."""
from __future__ import annotations

import json
import math
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdec.cli.types import DrafterSpecType
from specdec.errors import SpecdecError
from tests.cli_helpers import run_main, strict_json

FIXTURES = Path(__file__).parent / "fixtures" / "engines"
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# ---- drafter specs ---------------------------------------------------------------------
KINDS = ["lookup", "ngram", "model", "heads", "eagle", "none", "beam", ""]
ARGS = ["", "2", "64", "65", "0", "-1", "99999999999999999999", "2:earliest", "2:latest", "2:middle", "x", "1e3",
        "/nonexistent", ".", "k=4", "p=2", "w=nan", "w=inf", "w=0.3", "tree=8", "topk=2", "topk=0", "k=sixteen"]


@SETTINGS
@given(kind=st.sampled_from(KINDS), parts=st.lists(st.sampled_from(ARGS), max_size=4),
       seps=st.lists(st.sampled_from([":", ",", "="]), min_size=4, max_size=4),
       junk=st.text(max_size=6))
def test_drafter_specs_parse_or_are_refused_in_one_line(kind, parts, seps, junk) -> None:
    text = kind + "".join(sep + part for sep, part in zip(seps, parts)) + junk
    try:
        DrafterSpecType().convert(text, None, None)
    except click.BadParameter as exc:
        message = exc.format_message()
        assert "\n" not in message.strip() and message.strip(), (text, message)


# ---- engine outputs, studies and cost files ---------------------------------------------
HOSTILE = [None, "x", -1, 2.5, 1e308, -1e308, 1e30, 0, [], {}, [1, [2]], "1" * 400, True, "NaN", "Infinity"]
HOSTILE_TEXT = ["nan", "+Inf", "-1", "2.5", "1e308", "1" * 5000 + "x", "", "0", "10000000000", "1,5", "\x00"]


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def mutate(data, path: list, value):
    """`data` with the item at `path` (indices into dicts' sorted keys and lists) set to `value`."""
    if not path or not isinstance(data, (dict, list)) or not data:
        return value
    keys = sorted(data) if isinstance(data, dict) else list(range(len(data)))
    key = keys[path[0] % len(keys)]
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[key] = mutate(data[key], path[1:], value)
    return copy


def check_plan(code: int, out: str, err: str, argv: list[str]) -> None:
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:"), (argv, lines)
        return
    result = strict_json(out)
    for row in result.get("table", []) + result.get("rows", []):
        if "speedup" in row and row["speedup"] is not None:
            assert math.isfinite(row["speedup"]) and row["speedup"] > 0, (argv, row)
            if "expected_tokens" in row:
                assert row["speedup"] <= row["expected_tokens"] * (1 + 1e-9) + 1e-12, (argv, row)


JSON_FIXTURES = ["vllm_request.jsonl", "vllm_request_detailed.jsonl", "vllm_request_summary.json",
                 "sglang_generate.jsonl", "sglang_openai.json", "llama_timings.jsonl"]
TEXT_FIXTURES = ["vllm_metrics.txt", "vllm_v1.log", "vllm_v0.log", "sglang_metrics.txt", "sglang_decode.log",
                 "llama_server.log", "llama_statistics.log", "llama_speculative.txt"]


@SETTINGS
@given(name=st.sampled_from(JSON_FIXTURES), line=st.integers(0, 50), path=st.lists(st.integers(0, 50), max_size=6),
       value=st.sampled_from(HOSTILE))
def test_mutated_engine_json_is_planned_or_refused(capsys, tmp_path, name, line, path, value) -> None:
    text = (FIXTURES / name).read_text()
    lines = [json.loads(x) for x in text.splitlines() if x.strip()] if name.endswith(".jsonl") else [json.loads(text)]
    i = line % len(lines)
    lines[i] = mutate(lines[i], path, value)
    source = tmp_path / "engine.jsonl"
    source.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    argv = ["plan", "--from", str(source), "--c", "0.05", "--json", "--draft-length", "4"]
    check_plan(*run_main(capsys, argv), argv)


@SETTINGS
@given(name=st.sampled_from(TEXT_FIXTURES), line=st.integers(0, 200), token=st.integers(0, 40),
       value=st.sampled_from(HOSTILE_TEXT))
def test_mutated_engine_text_is_planned_or_refused(capsys, tmp_path, name, line, token, value) -> None:
    """A number of a metrics page or log line replaced by a hostile one."""
    lines = (FIXTURES / name).read_text().splitlines()
    i = line % len(lines)
    words = lines[i].split(" ")
    numeric = [j for j, w in enumerate(words) if any(ch.isdigit() for ch in w)]
    if numeric:
        j = numeric[token % len(numeric)]
        words[j] = value + ("," if words[j].endswith(",") else "")
    lines[i] = " ".join(words)
    source = tmp_path / "engine.txt"
    source.write_text("\n".join(lines) + "\n")
    argv = ["plan", "--from", str(source), "--c", "0.05", "--json", "--draft-length", "4"]
    check_plan(*run_main(capsys, argv), argv)


STUDY = {"heads_path": "H", "heads": 3, "k": 16, "heads_pass_ms": 1.0, "rescorers": {"2-gram": ["ngram", "N2"]},
         "verify_step_ms": {"0": 10.0, "3": 14.0, "6": 30.0},
         "by_depth": [{"method": "base", "depth": 3, "block_efficiency": 1.5, "tree_tokens": 3.0, "choose_ms": 0.0,
                       "options": {"p": 1}},
                      {"method": "2-gram parallel p=4", "depth": 2, "block_efficiency": 1.9, "tree_tokens": 6.0,
                       "choose_ms": 1.0, "options": {"p": 4, "rescorer": "2-gram", "w": 0.3}}]}
ESTIMATE = {"kind": "specdec.estimate", "verify_cost": [1.0, 1.1, 1.2, 1.3, 1.5],
            "cost": {"target_step_seconds": 0.01},
            "batch_timing": {"batch_sizes": [1, 2, 4], "k": [1, 2, 3],
                             "seconds": [[0.01, 0.011, 0.012], [0.012, 0.013, 0.014], [0.02, 0.021, 0.022]]}}
COUNTS = FIXTURES / "vllm_metrics.txt"


@SETTINGS
@given(which=st.sampled_from(["study", "verify", "batch"]), path=st.lists(st.integers(0, 50), min_size=1, max_size=5),
       value=st.sampled_from(HOSTILE + ["deep"]))
def test_mutated_study_and_cost_files_are_planned_or_refused(capsys, tmp_path, which, path, value) -> None:
    data = mutate(STUDY if which == "study" else ESTIMATE, path, value if value != "deep" else None)
    text = json.dumps(data)
    if value == "deep":
        text = text.replace("null", deep(100_000), 1)
    file = tmp_path / f"{which}.json"
    file.write_text(text)
    argv = {"study": ["plan-trees", str(file), "--json"],
            "verify": ["plan", "--alpha", "0.7", "--c", "0.05", "--verify-cost-file", str(file), "--json"],
            "batch": ["plan", "--from", str(COUNTS), "--c", "0.05", "--batch-cost-file", str(file), "--json"]}[which]
    check_plan(*run_main(capsys, argv), argv)


@pytest.mark.parametrize("spec", ["lookup:65", "heads:/nonexistent,k=4", "eagle:/nonexistent,topk=0", "ngram:"])
def test_spec_refusals_are_specdec_errors(spec) -> None:
    """The grammar's own refusals are SpecdecErrors (the option's type turns them into one line)."""
    from specdec.reference.drafters.spec import DrafterSpec

    try:
        DrafterSpec.parse(spec)
    except SpecdecError:
        return
    with pytest.raises(click.BadParameter):
        DrafterSpecType().convert(spec, None, None)
