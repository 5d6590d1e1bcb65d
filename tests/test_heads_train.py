"""Training and storing heads on tiny real models.

- Self-distillation learns: on periodic text, held-out top-1 agreement of every head with the
  target rises from chance level to > 0.9 (seeded).
- The store round-trips the heads exactly and refuses heads made for another target in one
  line; the CLI checks its options before any model loads.
- The diagnostics' h_max and repetition statistics on hand-made values.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from specdec.reference.heads.data import distill, frequent_vocab
from specdec.reference.heads.diagnostics import h_max, runs
from specdec.reference.heads.store import heads_on, load_heads, save_heads
from specdec.reference.heads.train import TrainConfig, evaluate, train_heads
from tests.cli_helpers import run_main
from tests.tiny_models import tiny_llama

VOCAB = 16


def periodic_windows(n: int, length: int, seed: int) -> list[list[int]]:
    """Windows of a few repeating patterns (periods 3 to 5), random phase."""
    g = np.random.default_rng(seed)
    patterns = [[3, 7, 1], [2, 9, 4, 12], [5, 0, 11, 6, 14]]
    out = []
    for _ in range(n):
        p = patterns[int(g.integers(len(patterns)))]
        start = int(g.integers(len(p)))
        out.append([p[(start + i) % len(p)] for i in range(length)])
    return out


@pytest.fixture(scope="module")
def trained():
    target = tiny_llama(VOCAB, seed=0, sharpness=8.0)
    data = distill(target, periodic_windows(48, 32, seed=0), top_k=4)
    held = distill(target, periodic_windows(8, 32, seed=1), top_k=4)
    heads = heads_on(target, frequent_vocab(data, VOCAB), 3)
    before = evaluate(heads, held)
    log = train_heads(heads, data, TrainConfig(n_heads=3, vocab=VOCAB, epochs=30, batch=64, lr=1e-2, seed=0))
    return target, heads, before, evaluate(heads, held), log


def test_self_distillation_learns_the_targets_future(trained) -> None:
    _, _, before, after, log = trained
    assert log["steps"] > 0
    for b, a in zip(before, after):
        assert a["top1"] > 0.9 and a["top1"] > b["top1"] + 0.2, (b, a)
        assert a["loss"] < b["loss"]


def test_store_round_trip_and_target_check(trained, tmp_path) -> None:
    target, heads, _, _, _ = trained
    model_dir = tmp_path / "target"
    target.save_pretrained(model_dir)
    from specdec.reference.heads.store import weights_fingerprint
    card = {"target": {"name": "tiny", "weights_sha256": weights_fingerprint(model_dir)}, "n_heads": 3}
    save_heads(heads, card, tmp_path / "heads")
    with pytest.raises(FileExistsError, match="force"):
        save_heads(heads, card, tmp_path / "heads")
    loaded, read = load_heads(tmp_path / "heads", target, model_dir)
    h, y = torch.randn(5, target.config.hidden_size), torch.tensor([1, 2, 3, 4, 5])
    torch.testing.assert_close(loaded(h, y), heads(h, y), rtol=0, atol=0)
    assert read["n_heads"] == 3 and read["format"] == "specdec-heads/1"
    other = tmp_path / "other"
    tiny_llama(VOCAB, seed=1, sharpness=8.0).save_pretrained(other)
    with pytest.raises(ValueError, match="were trained for target 'tiny'"):
        load_heads(tmp_path / "heads", target, other)
    (tmp_path / "heads" / "heads.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="cannot read"):
        load_heads(tmp_path / "heads", target, model_dir)


def test_h_max_and_runs() -> None:
    assert h_max([1.0, 2.0, 3.0, 2.5]) == 3
    assert h_max([2.0, 1.0]) == 1 and h_max([1.0]) == 1
    repetition, max_run = runs(np.array([[1, 1, 1, 2], [1, 2, 3, 4]]))
    assert repetition == pytest.approx(2 / 6) and max_run == pytest.approx((3 + 1) / 2)


@pytest.mark.parametrize("argv, option", [
    (["heads", "train", "--out", "X", "--tokens", "100"], "--tokens"),
    (["heads", "train", "--out", "X", "--heads", "0"], "--heads"),
    (["heads", "train", "--out", "X", "--window", "4"], "--window"),
    (["heads", "eval", "/nonexistent/heads"], "PATH"),
    (["decode", "--prompt", "hi", "--drafter", "heads:/nonexistent/heads"], "--drafter"),
    (["decode", "--prompt", "hi", "--drafter", "heads:"], "--drafter"),
])
def test_cli_refuses_bad_heads_options(capsys, argv, option) -> None:
    code, out, err = run_main(capsys, argv)
    assert code == 2 and option in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3


def test_cli_refuses_a_folder_without_heads(capsys, tmp_path) -> None:
    (tmp_path / "card.json").write_text(json.dumps({"format": "specdec-heads/1"}))
    code, out, err = run_main(capsys, ["heads", "eval", str(tmp_path)])
    assert code == 2 and "heads.safetensors is missing" in err


def test_decode_refuses_a_heads_path_without_heads_before_loading(capsys, tmp_path) -> None:
    code, out, err = run_main(capsys, ["decode", "--prompt", "hi", "--drafter", f"heads:{tmp_path}"])
    assert code == 2 and "--drafter" in err and "heads.safetensors is missing" in err
    code, out, err = run_main(capsys, ["decode", "--prompt", "hi", "--temperature", "1", "--drafter",
                                       f"heads:{tmp_path},p=2"])
    assert code == 2 and "--drafter" in err
