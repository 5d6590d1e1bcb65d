"""Cost files (specdec.costfiles): every kind and every older shape without "kind" is read to the
same values; a file of another kind, an unknown kind or a missing field is one SpecdecError line
naming the file and what is wrong."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec.costfiles import (KIND_ESTIMATE, KIND_LATTICE_STUDY, KIND_SERVE, KIND_TREE_COSTS, STUDY_FOR_FIGURES,
                               read_batch_times, read_lattice_study, read_tree_steps, read_verify_cost,
                               study_tree_steps)
from specdec.errors import SpecdecError
from specdec.simulator.batch import batch_times_at

CURVE = [1.0, 1.1, 1.25]
BATCH = {"batch_sizes": [1, 4], "seconds": [[0.01, 0.011, 0.012], [0.012, 0.02, 0.03]], "device": "cpu",
         "context_tokens": 128}
ESTIMATE = {"verify_cost": CURVE, "cost": {"target_step_seconds": 0.004}, "batch_timing": BATCH}
STEPS = [[0.009, 0.011], [0.010, 0.016, 0.018, 0.02, 0.03]]  # t_mix(B, 0..B) for B = 1, 4
TREE_COSTS = ESTIMATE | {"verify_step_ms": {"0": 4.0, "3": 4.5, "8": 6.0}, "device_name": "GPU X"}
STUDY = {"heads_path": "H", "k": 16, "by_depth": [], "block_efficiency": [], "oracle_curve": [], "repetition": [],
         "wins": [], "verify_step_ms": {"0": 10.0, "3": 14.0}}


def write(tmp_path: Path, data, name: str = "file.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize("data", [CURVE, {"verify_cost": CURVE}, ESTIMATE, ESTIMATE | {"kind": KIND_ESTIMATE},
                                  TREE_COSTS | {"kind": KIND_TREE_COSTS}])
def test_verify_cost_from_every_kind_and_shape(tmp_path, data) -> None:
    assert read_verify_cost(write(tmp_path, data)) == tuple(CURVE)


@pytest.mark.parametrize("data", [ESTIMATE, ESTIMATE | {"kind": KIND_ESTIMATE}, TREE_COSTS | {"kind": KIND_TREE_COSTS}])
def test_batch_times_from_every_kind_and_shape(tmp_path, data) -> None:
    [times] = read_batch_times(write(tmp_path, data))
    assert times.batch_sizes == (1, 4) and times.seconds == ((0.01, 0.011, 0.012), (0.012, 0.02, 0.03))
    assert (times.device, times.context_tokens) == ("cpu", 128)


def test_batch_times_per_context_from_a_serve_bench_file(tmp_path) -> None:
    contexts = [{"context": n, "timing": BATCH | {"context_tokens": n + 12}} for n in (128, 1024)]
    tables = read_batch_times(write(tmp_path, {"kind": KIND_SERVE, "contexts": contexts}))
    assert [t.context_tokens for t in tables] == [140, 1036] and all(t.batch_sizes == (1, 4) for t in tables)
    with pytest.raises(SpecdecError, match="holds no batch_timing"):
        read_batch_times(write(tmp_path, {"kind": KIND_SERVE, "contexts": [{"context": 128}]}))


def test_batch_times_keep_the_speculating_servers_mixed_steps(tmp_path) -> None:
    """`specdec llamacpp costs --mixed-k`: t_mix(B, 0..B) per batch size at each K, in the list of
    today's files or the one object of the first ones, read to the same values and interpolated
    between contexts as t(B, k) is."""
    steps = STEPS
    for mixed in ([{"k": 3, "seconds": steps}], {"k": 3, "seconds": steps}):
        (times,) = read_batch_times(write(tmp_path, {"batch_timing": BATCH | {"mixed": mixed}}))
        assert times.mixed_steps() == {3: {1: tuple(steps[0]), 4: tuple(steps[1])}}
    far = BATCH | {"context_tokens": 512, "mixed": [{"k": 3, "seconds": [[x * 2 for x in r] for r in steps]}]}
    tables = read_batch_times(write(tmp_path, {"batch_timing": [BATCH | {"mixed": [{"k": 3, "seconds": steps}]}, far]}))
    assert batch_times_at(tables, 320).mixed_steps()[3][4] == pytest.approx([1.5 * x for x in steps[1]])
    assert read_batch_times(write(tmp_path, {"batch_timing": BATCH}))[0].mixed == ()


def test_tree_steps_timed_on_trees_or_from_a_curve(tmp_path) -> None:
    timed = {0: 0.004, 3: 0.0045, 8: 0.006}
    for data in (TREE_COSTS, TREE_COSTS | {"kind": KIND_TREE_COSTS}):
        path = write(tmp_path, data)
        steps = read_tree_steps(path)
        assert steps.seconds == pytest.approx(timed) and "GPU X" in steps.source and str(path) in steps.source
    from_curve = {0: 0.004, 1: 0.0044, 2: 0.005}
    for data in (ESTIMATE, ESTIMATE | {"kind": KIND_ESTIMATE}, TREE_COSTS | {"kind": KIND_ESTIMATE},
                 {"verify_cost": CURVE, "target_step_seconds": 0.004}):
        steps = read_tree_steps(write(tmp_path, data))
        assert steps.seconds == pytest.approx(from_curve) and "v(1..3), t(1) 4.00 ms" in steps.source


def test_lattice_study_with_and_without_kind(tmp_path) -> None:
    for data in (STUDY, STUDY | {"kind": KIND_LATTICE_STUDY}):
        path = write(tmp_path, data)
        study = read_lattice_study(path)
        assert read_lattice_study(path, STUDY_FOR_FIGURES) == study and study["k"] == 16
        assert study_tree_steps(study, path).seconds == {0: 0.010, 3: 0.014}
    assert study_tree_steps({"by_depth": [], "k": 4}, path) is None  # run with --no-timing


@pytest.mark.parametrize("reader, data, words", [
    (read_verify_cost, ESTIMATE | {"kind": "specdec.nonsense"}, ["unknown kind 'specdec.nonsense'"]),
    (read_verify_cost, STUDY | {"kind": KIND_LATTICE_STUDY}, ["is a specdec.lattice-study file, not a verify-cost"]),
    (read_verify_cost, {"costs": [1, 2]}, ["must hold a JSON list of numbers"]),
    (read_verify_cost, {"kind": KIND_ESTIMATE, "verify_cost": None}, ["must hold a JSON list of numbers"]),
    (read_verify_cost, [2.0, 3.0], ["verify_cost[0]"]),
    (read_verify_cost, "{not json", ["cannot read", "as JSON"]),
    (read_batch_times, {"kind": KIND_ESTIMATE, "verify_cost": CURVE}, ["holds no batch_timing"]),
    (read_batch_times, {"batch_timing": BATCH | {"batch_sizes": [4, 1]}}, ["batch_timing", "strictly increasing"]),
    (read_batch_times, {"batch_timing": BATCH | {"seconds": [[0.01, "x"], [0.02, 0.03]]}}, ["batch_timing"]),
    (read_batch_times, {"kind": KIND_LATTICE_STUDY}, ["not a batch cost file"]),
    (read_batch_times, {"batch_timing": BATCH | {"mixed": [{"k": 3, "seconds": [[0.01, 0.02], [0.01]]}]}},
     ["mixed steps at k = 3", "t_mix(B, 0..B)"]),
    (read_batch_times, {"batch_timing": BATCH | {"mixed": [{"k": 3, "seconds": [[0.01, 0.02], [0.01] * 5]}]}},
     ["mixed steps at k = 3", "rising above t_mix(B, 0)"]),
    (read_batch_times, {"batch_timing": BATCH | {"mixed": {"k": 4, "seconds": [[0.01, 0.02], [0.01] * 5]}}},
     ["mixed steps need one entry per k in 2..3"]),
    (read_batch_times, {"batch_timing": BATCH | {"mixed": [{"k": 2}]}}, ["mixed steps at k = 2"]),
    (read_batch_times, {"batch_timing": BATCH | {"mixed": [{"k": 2, "seconds": STEPS}, {"k": 2, "seconds": STEPS}]}},
     ["one entry per k"]),
    (read_batch_times, {"batch_timing": BATCH | {"mixed": "junk"}}, ["one entry per k"]),
    (read_tree_steps, {"kind": KIND_TREE_COSTS, "verify_cost": CURVE}, ["lacks verify_step_ms"]),
    (read_tree_steps, {"verify_cost": CURVE}, ["cost.target_step_seconds", "verify_step_ms"]),
    (read_tree_steps, {"verify_step_ms": {"0": 1.0, "x": 2.0}}, ["verify_step_ms must map"]),
    (read_tree_steps, [1.0, 1.1], ["must hold a JSON object"]),
    (read_lattice_study, {"block_efficiency": []}, ["not a lattice study", "by_depth"]),
    (read_lattice_study, {"by_depth": {}, "k": 4}, ["by_depth rows"]),
    (read_lattice_study, {"by_depth": [{"method": "a", "block_efficiency": "x"}], "k": 4}, ["by_depth row 0"]),
    (read_lattice_study, {"by_depth": [], "k": 4, "heads_pass_ms": "fast"}, ["heads_pass_ms"]),
    (read_lattice_study, ESTIMATE | {"kind": KIND_ESTIMATE}, ["is a specdec.estimate file, not a lattice study"]),
    (read_lattice_study, STUDY | {"kind": "elsewhere.study"}, ["unknown kind 'elsewhere.study'"]),
])
def test_unusable_files_are_one_line_naming_the_file(tmp_path, reader, data, words) -> None:
    path = write(tmp_path, data)
    with pytest.raises(SpecdecError) as caught:
        reader(path)
    message = str(caught.value)
    assert str(path) in message and len(message.splitlines()) == 1
    assert all(w in message for w in words), message
