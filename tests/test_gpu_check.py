"""benchmarks/gpu_check.sh end to end on the CPU with tiny shapes, as the device runs it (the
package laid out by symlinks, `specdec costs` as a subprocess), so a GPU's first minute is not
spent on a typo; then gpu_report.py's cost files are what `plan --batch-cost-file` reads."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from specdec.costfiles import read_batch_times

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_runs_end_to_end_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), str(out), "--shapes", "tiny-draft,tiny",
                           "--batch-sizes", "1,2", "--max-k", "2", "--contexts", "16,24", "--hardware", "h200",
                           "--trial-s", "0.001"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    raw = json.loads((out / "gpu-raw.json").read_text())
    assert raw["logits_check"]["top1_agreement"] == 1.0 and raw["environment"]["device"] == "cpu"
    assert [s["name"] for s in raw["shapes"]] == ["tiny-draft", "tiny"]
    for shape in raw["shapes"]:
        assert shape["complete"] and len(shape["cells"]) == 2 * 2 * 2 and "error" not in shape["modelled"]
        assert all(c["seconds"] > 0 for c in shape["cells"])
        modelled = shape["modelled"]["report"]
        assert modelled["roofline"]["hardware"] == "h200" and len(modelled["batch_timing"]) == 2
    report = json.loads((out / "gpu-report.json").read_text())
    assert [s["name"] for s in report["shapes"]] == ["tiny-draft", "tiny"]
    assert report["fit"]["fitted_on"] and report["plan"]  # the refit and the gamma comparison ran
    assert "| tiny |" in (out / "gpu-report.md").read_text()

    costs = tmp_path / "costs"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_report.py"), str(out / "gpu-raw.json"), "--out",
                    str(costs), "--cost-files"], check=True, capture_output=True, timeout=120)
    tables = read_batch_times(costs / "gpu-costs-tiny.json")
    assert [t.context_tokens for t in tables] == [16, 24] and tables[0].batch_sizes == (1, 2)
    cells = {(c["L"], c["B"], c["k"]): c["seconds"] for c in raw["shapes"][1]["cells"]}
    for table in tables:
        got = np.array(table.seconds)
        want = np.array([[cells[(table.context_tokens, b, k)] for k in (1, 2)] for b in (1, 2)])
        assert np.allclose(got, want)


def test_gpu_estimate_runs_end_to_end_on_the_cpu(tmp_path: Path) -> None:
    """benchmarks/gpu_estimate.py (the device call that runs `specdec estimate --batch-sizes` as a
    user does) through the same launcher: a random-weight model of the tiny shape, the CLI's
    table and the direct one, both positive and of the asked size."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, GPU_SCRIPT="gpu_estimate.py")
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), str(out), "--shape", "tiny",
                           "--device", "cpu", "--batch-sizes", "1,2", "--max-k", "2", "--context", "16"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((out / "gpu-estimate.json").read_text())
    assert result["estimate"]["batch_sizes"] == [1, 2] and len(result["direct_seconds"]) == 2
    assert all(t > 0 for row in result["estimate"]["seconds"] + result["direct_seconds"] for t in row)
    assert (out / "gpu-estimate.md").read_text().count("| 2 |") == 1
