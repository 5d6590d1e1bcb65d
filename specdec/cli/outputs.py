"""Output paths checked before a command does any work: a folder it will write into (and the
files it will write there), or a file or folder it will create later. Each problem is a usage
error naming the option; nothing is written by the checks but the output folder itself."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from specdec.paths import special_file


class OutputPath(click.Path):
    """click.Path that refuses an empty value (which pathlib would read as '.', the current folder)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path names nothing to write", param, ctx)
        return super().convert(value, param, ctx)


def _refuse_special(path: Path, option: str) -> None:
    kind = special_file(path)
    if kind:
        raise click.BadParameter(f"{str(path)!r} is {kind}: specdec replaces only regular files", param_hint=option)


def check_out_dir(path: str | os.PathLike, option: str = "--out", files: tuple[str, ...] = ()) -> Path:
    """Create the output folder now and check that it is writable and that none of the `files`
    the command will write there is a folder, so a run cannot fail at its end for want of a
    place to write."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".specdec-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise click.BadParameter(f"cannot write to {str(out)!r}: {exc.strerror or exc}", param_hint=option) from None
    for name in files:
        _refuse_special(out / name, option)
        if (out / name).is_dir():
            raise click.BadParameter(f"{str(out / name)!r} is a folder; the command writes a file there",
                                     param_hint=option)
    return out


def check_creatable(path: str | os.PathLike, option: str, folder: bool = False) -> Path:
    """An output path (a file, or a folder when `folder`) the command can create later, checked
    before any work: the nearest existing ancestor must be a folder where a file can be created
    (a scratch file is made there and removed at once), and the path itself, if it exists, of the
    right kind."""
    out = Path(path)
    if not str(path):
        raise click.BadParameter("an empty path names nothing to write", param_hint=option)
    if not folder:
        _refuse_special(out, option)
    if out.exists() and out.is_dir() != folder:
        raise click.BadParameter(f"{str(out)!r} is a {'file' if folder else 'folder'}", param_hint=option)
    parent = out if out.exists() and folder else out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise click.BadParameter(f"cannot create {str(out)!r}: {str(parent)!r} is a file", param_hint=option)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise click.BadParameter(f"cannot create {str(out)!r}: {str(parent)!r} is not writable", param_hint=option)
    try:  # permissions do not tell all (root, a read-only mount, /proc, /sys): create a scratch file and remove it
        fd, probe = tempfile.mkstemp(prefix=".specdec-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise click.BadParameter(f"cannot create {str(out)!r}: {str(parent)!r}: {exc.strerror or exc}",
                                 param_hint=option) from None
    return out
