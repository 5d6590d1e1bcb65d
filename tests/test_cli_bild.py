"""`specdec bild`, run as a real command on tiny Llama models saved with the default target's
tokenizer (local files only); its JSON is parsed and checked.

Names: the little model is the drafter, the large model the target; alpha_FB / alpha_RB
are BiLD's fallback / rollback thresholds.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from specdec.paths import default_target_dir
from specdec.cli import cli
from tests.fakes import noisy_copy
from tests.tiny_models import tiny_llama

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
PROMPT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory) -> tuple[Path, Path]:
    """(target folder, little folder): tiny Llamas over the default tokenizer's 49,152 ids."""
    if not all((default_target_dir() / f).is_file() for f in TOKENIZER_FILES):
        pytest.skip("the default target's tokenizer is not cached (run scripts/setup.sh)")
    root = tmp_path_factory.mktemp("bild-cli")
    target = tiny_llama(vocab_size=49152, seed=0, sharpness=20.0)
    target.config.eos_token_id, target.config.bos_token_id = 2, 1
    folders = []
    for name, model in (("target", target), ("little", noisy_copy(target, 0.5, 1))):
        folder = root / name
        model.save_pretrained(folder)
        for f in TOKENIZER_FILES:
            shutil.copy(default_target_dir() / f, folder / f)
        folders.append(folder)
    return folders[0], folders[1]


def bild_json(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["bild", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_single_policy(tiny_pair) -> None:
    target, little = tiny_pair
    out = bild_json("--target", str(target), "--drafter", f"model:{little}", "--prompt", PROMPT,
                    "--fallback", "0.3", "--rollback", "argmax", "--max-new-tokens", "24", "--ignore-eos")
    baseline, bild = out["rows"]
    assert baseline["kind"] == "ar" and bild["kind"] == "bild" and bild["rollback"] == "argmax"
    assert bild["match_rate"] == 1.0 and bild["outputs"] == baseline["outputs"]  # argmax rollback = greedy target
    assert bild["new_tokens"] == 24 and out["text"] == out["target_text"]
    loose = bild_json("--target", str(target), "--drafter", f"model:{little}", "--prompt", PROMPT,
                      "--fallback", "0", "--rollback", "inf", "--max-little-steps", "4", "--max-new-tokens", "24",
                      "--ignore-eos")
    row = loose["rows"][1]  # both ablations: hand over every 4 little tokens, keep them all
    assert row["rollbacks"] == 0 and row["little_fraction"] == pytest.approx(19 / 24)  # 4 + 1 per pass, 24 tokens


def test_sweep_writes_figure_and_json(tiny_pair, tmp_path) -> None:
    target, little = tiny_pair
    out = bild_json("--target", str(target), "--drafter", f"model:{little}", "--prompt", PROMPT,
                    "--prompt", "Once upon a time", "--sweep", "--out", str(tmp_path), "--fallbacks", "0.3,0.6",
                    "--rollbacks", "2,argmax", "--gammas", "2", "--handovers", "3", "--max-new-tokens", "16",
                    "--ignore-eos")
    assert Path(out["figure"]).is_file()
    saved = json.loads((tmp_path / "bild_sweep.json").read_text())
    assert [r["label"] for r in saved["rows"]] == [r["label"] for r in out["rows"]]
    kinds = [r["kind"] for r in out["rows"]]
    assert kinds == ["ar"] + ["bild"] * 5 + ["sd"]
    assert out["rows"][-1]["match_rate"] == 1.0  # exact SD, greedy


def test_bad_options(tiny_pair) -> None:
    target, little = tiny_pair
    runner = CliRunner()
    result = runner.invoke(cli, ["bild", "--target", str(target), "--drafter", f"model:{little}", "--prompt", PROMPT,
                                 "--rollback", "lots"])
    assert result.exit_code == 2 and "--rollback" in result.output
    result = runner.invoke(cli, ["bild", "--target", str(target), "--prompt", PROMPT, "--sweep"])
    assert result.exit_code == 2 and "--out" in result.output
    result = runner.invoke(cli, ["bild", "--target", str(target), "--drafter", "none", "--prompt", PROMPT])
    assert result.exit_code == 2 and "little model" in result.output
