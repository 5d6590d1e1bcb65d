"""`specdec ngram build` never leaves a folder mixing two models: the model is built beside
--out and renamed into place, an existing model is replaced only with --force, and an
interruption at any stage (KeyboardInterrupt raised in process at each step; SIGINT sent to
the real command at several delays) leaves either the old model, byte for byte, or none, and
no scratch folder. Bad --eos-id / --threads / UTF-8 input are one-line errors."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import specdec.ngram.build as build_module
import specdec.paths as paths_module
from specdec.ngram.build import build_model
from tests.ngram_corpus import VOCAB, require_kenlm_tools


def snapshot(folder: Path) -> dict[str, bytes] | None:
    if not folder.exists():
        return None
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def no_scratch(parent: Path) -> bool:
    return not any(p.name.startswith(".") and (".building-" in p.name or ".old-" in p.name) for p in parent.iterdir())


@pytest.fixture()
def old_model(tmp_path, corpus_file) -> Path:
    require_kenlm_tools()
    out = tmp_path / "model"
    build_model(corpus_file, 2, out, VOCAB, eos_id=499, memory="200M")
    return out


def test_rebuild_needs_force(old_model, corpus_file) -> None:
    before = snapshot(old_model)
    with pytest.raises(FileExistsError, match="force"):
        build_model(corpus_file, 3, old_model, VOCAB, eos_id=499, memory="200M")
    assert snapshot(old_model) == before
    report = build_model(corpus_file, 3, old_model, VOCAB, eos_id=499, memory="200M", force=True)
    assert report.order == 3 and snapshot(old_model) != before and no_scratch(old_model.parent)


@pytest.mark.parametrize("stage", ["run_lmplz", "run_build_binary", "load_tables", "read_counts", "replace_folder"])
def test_interrupt_at_every_stage_keeps_the_old_model(old_model, corpus_file, monkeypatch, stage) -> None:
    before = snapshot(old_model)

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(paths_module if stage == "replace_folder" else build_module, stage, interrupt)
    with pytest.raises(KeyboardInterrupt):
        build_model(corpus_file, 3, old_model, VOCAB, eos_id=499, memory="200M", force=True)
    assert snapshot(old_model) == before and no_scratch(old_model.parent)


def test_interrupt_inside_the_swap(old_model, corpus_file, monkeypatch) -> None:
    """Interrupted between moving the old model aside and renaming the new one in: no model at
    --out (never a mix), and the old one is still on disk beside it."""
    real = os.replace

    def replace(src, dst):
        if ".building-" in Path(src).name:  # the new model's rename, after the old one moved aside
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(build_module.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        build_model(corpus_file, 3, old_model, VOCAB, eos_id=499, memory="200M", force=True)
    assert snapshot(old_model) is None
    aside = [p for p in old_model.parent.iterdir() if ".old-" in p.name]
    assert len(aside) == 1 and (aside[0] / "model.json").is_file()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_real_command(old_model, corpus_file, signum) -> None:
    """SIGINT or SIGTERM at several delays into `specdec ngram build --force`: old or new, never
    a mix, and no scratch folder left beside --out (SIGTERM exits 143)."""
    before = snapshot(old_model)
    code = "import sys; from specdec.cli import main; main(sys.argv[1:])"
    argv = [sys.executable, "-c", code, "ngram", "build", "--order", "4", "--text", str(corpus_file),
            "--vocab-size", str(VOCAB), "--eos-id", "499", "--memory", "200M", "--out", str(old_model), "--force"]
    outcomes = set()
    for delay in (0.5, 1.0, 1.5, 2.0, 3.0):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert b"Traceback" not in err
        assert proc.returncode in (0, 143 if signum == signal.SIGTERM else 130), (proc.returncode, err)
        now = snapshot(old_model)
        assert no_scratch(old_model.parent)
        if now == before:
            outcomes.add("old")
        else:  # the build finished first: a complete new model
            assert now is not None and {"model.arpa", "model.binary", "model.json"} <= set(now)
            outcomes.add("new")
            before = now
    assert outcomes


def run(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from specdec.cli import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, option", [
    (["--eos-id", "-1"], "--eos-id"),
    (["--eos-id", "500"], "--eos-id"),
    (["--vocab-size", "0"], "--vocab-size"),
    (["--threads", "0"], "--threads"),
])
def test_build_usage_errors(tmp_path, corpus_file, args, option) -> None:
    argv = ["ngram", "build", "--order", "2", "--text", str(corpus_file), "--vocab-size", str(VOCAB),
            "--out", str(tmp_path / "o"), *args]
    done = run(*argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and option in lines[0], done.stderr
    assert not (tmp_path / "o").exists()


def test_existing_model_without_force_is_a_usage_error(old_model, corpus_file) -> None:
    done = run("ngram", "build", "--order", "2", "--text", str(corpus_file), "--vocab-size", str(VOCAB),
               "--out", str(old_model))
    assert done.returncode == 2 and "--force" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_aligned_threads_checked_before_work() -> None:
    for bad in ("0", "-1"):
        done = run("ngram", "aligned", "--threads", bad)
        assert done.returncode == 2 and "--threads" in done.stderr and "Traceback" not in done.stderr


def test_text_that_is_not_utf8(tmp_path) -> None:
    path = tmp_path / "ids.txt"
    path.write_bytes(b"1 2 3\n\xff\xfe 4\n")
    done = run("ngram", "build", "--order", "2", "--text", str(path), "--vocab-size", "10", "--out",
               str(tmp_path / "o"))
    assert done.returncode == 2 and "ids.txt" in done.stderr and "UTF-8" in done.stderr  # issue 53: the option's
    assert len(done.stderr.strip().splitlines()) == 1
