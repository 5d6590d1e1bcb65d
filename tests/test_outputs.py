"""Outputs are only ever regular files (issue 53): a device, FIFO, socket or symbolic link named as
an output is refused before any work (one line naming the option, exit status 2) and left as it
was; the atomic writers refuse them too (the last line of defence); a write that fails for a
reason of the place (full disk, read-only) is one line and leaves the old output intact; Ctrl-C
exits 130. Devices are made in the test's own folder (`mknod`, as root), never /dev's."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec import paths
from tests.cli_helpers import run_main

TINY = {"num_hidden_layers": 2, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
        "num_key_value_heads": 1, "vocab_size": 10, "model_type": "llama"}
KINDS = ("missing", "regular", "fifo", "symlink", "dangling", "device", "folder")


def make(kind: str, path: Path) -> None:
    """An output path of `kind` at `path` (a regular file holds b"old")."""
    if kind == "regular":
        path.write_bytes(b"old")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("symlink", "dangling"):
        target = path.with_name(path.name + ".target")
        if kind == "symlink":
            target.write_bytes(b"old")
        path.symlink_to(target)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a null device of the test's own
    elif kind == "folder":
        path.mkdir()


def state(path: Path) -> tuple:
    """What is at `path`: its type bits and, for a regular file, its bytes (a link is not followed)."""
    if not os.path.lexists(path):
        return ("missing",)
    mode = os.lstat(path).st_mode
    return (stat.S_IFMT(mode), path.read_bytes() if stat.S_ISREG(mode) else None)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(KINDS + ("read-only", "full")), text=st.text(max_size=20))
def test_write_atomic_replaces_only_regular_files(tmp_path_factory, kind: str, text: str) -> None:
    """Property over output paths: a missing or regular path gets exactly the text; any other
    (device, FIFO, symlink, folder) is refused; a read-only place (/proc, where no file can be
    created: its regular file /proc/version stands for the old output) and a full disk (every
    write fails with ENOSPC) raise OSError; whatever was there stays byte for byte, and no
    scratch file is left."""
    folder = tmp_path_factory.mktemp("out")
    path = Path("/proc/version") if kind == "read-only" else folder / "out.json"
    if kind != "read-only":
        make("regular" if kind == "full" else kind, path)
    before = state(path)
    if kind in ("missing", "regular"):
        paths.write_atomic(path, text)
        assert path.read_bytes() == text.encode("utf-8")
    elif kind in ("read-only", "full"):
        def full(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

        with mock.patch.object(Path, "write_text", full) if kind == "full" else contextlib.nullcontext():
            with pytest.raises(OSError):
                paths.write_atomic(path, text)
        assert state(path) == before
    else:
        with pytest.raises((paths.NotARegularFile, IsADirectoryError)):
            paths.write_atomic(path, text)
        assert state(path) == before
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no scratch file left


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling", "device"])
def test_costs_refuses_a_special_output_before_any_work(capsys, tmp_path: Path, kind: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "costs.json"
    make(kind, out)
    before = state(out)
    code, _, err = run_main(capsys, ["costs", "--config", str(config), "--hardware", "h100-sxm", "--out", str(out)])
    assert code == 2 and "--out" in err and "regular files" in err and len(err.strip().splitlines()) == 1, err
    assert state(out) == before


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_figures_refuses_a_special_output_file_in_its_folder(capsys, tmp_path: Path, kind: str) -> None:
    from specdec.cli.outputs import check_out_dir

    make(kind, tmp_path / "validation.json")
    import click

    with pytest.raises(click.BadParameter, match="regular files"):
        check_out_dir(tmp_path, files=("validation.json",))


def test_an_empty_output_path_is_refused(capsys, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    code, _, err = run_main(capsys, ["costs", "--config", str(config), "--hardware", "h100-sxm", "--out", ""])
    assert code == 2 and "--out" in err


@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EROFS])
def test_a_full_or_read_only_place_is_one_line_and_the_old_file_stays(capsys, tmp_path: Path, monkeypatch,
                                                                      number: int) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "costs.json"
    out.write_bytes(b"old")

    def fail(self, data, *args, **kwargs):  # the scratch file's write fails as a full disk would
        raise OSError(number, os.strerror(number), str(self))

    monkeypatch.setattr(Path, "write_text", fail)
    code, _, err = run_main(capsys, ["costs", "--config", str(config), "--hardware", "h100-sxm", "--out", str(out)])
    assert code == 2 and os.strerror(number) in err and len(err.strip().splitlines()) == 1, err  # issue 53
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "costs.json"]


def test_ctrl_c_exits_130(capsys, tmp_path: Path, monkeypatch) -> None:
    import specdec.cli.costs as costs

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    monkeypatch.setattr(costs, "_report", interrupt)
    code, _, err = run_main(capsys, ["costs", "--config", str(config), "--hardware", "h100-sxm"])
    assert code == 130 and err.strip().splitlines()[-1] == "Interrupted."
