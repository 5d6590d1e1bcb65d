"""Where specdec keeps what it builds, and how it writes there (imports nothing of the project).

The cache is `$SPECDEC_CACHE` when set, else `.cache/` in the checkout this package runs
from (an editable install, as `scripts/setup.sh` makes), else `~/.cache/specdec`. Every
folder below is read from the environment when asked for, so setting `SPECDEC_CACHE` after
import moves everything.

A file or folder is written under a scratch name beside it and renamed into place when
complete, so a crash or Ctrl-C never leaves half of one over a good one; a command's several
output files are rendered into one scratch folder and published together (`publishing`): all
of them replace the old ones, or none does. Scratch names start with a dot: `.{name}.tmp-{pid}`
(a file), `.{name}.building-{pid}` (a folder being built), `.{name}.old-{pid}` (what it
replaces, during the swap).
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CACHE_ENV = "SPECDEC_CACHE"
CHECKOUT = Path(__file__).resolve().parent.parent  # the repository root in an editable install


def cache_dir() -> Path:
    """The cache folder: `$SPECDEC_CACHE`, else the checkout's `.cache/`, else `~/.cache/specdec`."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "reference").is_dir():
        return CHECKOUT / ".cache"
    return Path.home() / ".cache" / "specdec"


def cache_problem() -> str | None:
    """What is wrong with `$SPECDEC_CACHE` as the cache folder, or None: it must be a folder, or
    creatable in the nearest folder above it that exists (a read-only cache that exists is fine)."""
    value = os.environ.get(CACHE_ENV)
    if not value:
        return None
    path = Path(value).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        where = "it" if existing == path else str(existing)
        return f"{CACHE_ENV}={value} cannot be the cache: {where} is not a folder"
    if existing != path and not os.access(existing, os.W_OK | os.X_OK):
        return f"{CACHE_ENV}={value} cannot be the cache: it does not exist and {existing} is not writable"
    return None


def models_dir() -> Path:
    """Converted models: the default target and every GGUF file given as a model."""
    return cache_dir() / "models"


def default_target_dir() -> Path:
    """The float32 SmolLM2-135M-Instruct folder converted by `scripts/setup.sh`."""
    return models_dir() / "smollm2-135m-instruct"


def corpus_dir() -> Path:
    """Raw texts, normalised chunks, token ids and aligned corpora."""
    return cache_dir() / "corpus"


def kenlm_bin_dir() -> Path:
    """KenLM's lmplz and build_binary, built by `scripts/setup.sh`."""
    return cache_dir() / "kenlm" / "bin"


class NotARegularFile(FileExistsError):
    """An output path that holds a device, FIFO, socket or symbolic link: never replaced."""


def special_file(path: str | os.PathLike) -> str | None:
    """What an existing output path is when it is neither missing, a regular file nor a folder:
    "a symbolic link", "a device", "a FIFO", "a socket" (None otherwise). Only regular files are
    ever replaced: a rename onto /dev/null would turn the device into a file."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def refuse_special(path: str | os.PathLike) -> None:
    """Raise NotARegularFile when `path` is a device, FIFO, socket or symbolic link."""
    kind = special_file(path)
    if kind:
        raise NotARegularFile(f"{os.fspath(path)} is {kind}: specdec replaces only regular files; nothing was written")


def scratch(path: Path, kind: str) -> Path:
    """The scratch name `.{name}.{kind}-{pid}` beside `path` (kind: "tmp", "building", "old")."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}")


@contextmanager
def writing(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary file name beside `path` for a writer that needs a name (savefig,
    savez, a subprocess); when the block completes, it is renamed to `path` in one step; on
    any exception (KeyboardInterrupt too) it is removed and `path` is untouched. A `path` that is
    not a regular file (`refuse_special`) is refused before anything is written."""
    path = Path(path)
    refuse_special(path)
    tmp = scratch(path, "tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write `data` (str as UTF-8) to `path` through a temporary name (`writing`). The folder
    must exist. Returns the path."""
    with writing(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
    return Path(path)


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """Yield a scratch folder beside `out`; when the block completes, it replaces `out` in one
    rename (`replace_folder`); on any exception (KeyboardInterrupt too) the scratch folder goes
    and `out` is untouched."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = scratch(out, "building")
    shutil.rmtree(work, ignore_errors=True)
    try:
        work.mkdir()
        yield work
        replace_folder(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def replace_folder(work: Path, out: Path) -> None:
    """Rename a finished folder `work` to `out`, moving an old `out` aside first and deleting it
    after, so `out` always holds one complete build (never a mix of two)."""
    old = scratch(out, "old")
    if out.exists():
        os.replace(out, old)
    os.replace(work, out)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def publishing(out: Path) -> Iterator[Path]:
    """Yield a scratch folder beside the files of `out` (a folder that exists); the files the
    block writes there replace their namesakes in `out` together when it completes (`publish`),
    and on any exception the scratch folder goes and `out` is as it was."""
    work = scratch(out / "outputs", "building")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        yield work
        publish({f: out / f.name for f in sorted(work.iterdir())})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def publish(files: dict[Path, Path]) -> None:
    """Rename each finished file onto its destination, all or none: a destination that is a
    folder stops it before anything moves; the old files are moved aside first and, should a
    rename fail half way, the new ones are removed and the old ones put back."""
    for dest in files.values():
        refuse_special(dest)
        if dest.is_dir():
            raise IsADirectoryError(f"{dest} is a folder; nothing was written")
    aside: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for src, dest in files.items():
            if dest.exists():
                old = scratch(dest, "old")
                os.replace(dest, old)
                aside.append((old, dest))
            os.replace(src, dest)
            placed.append(dest)
    except BaseException:
        for dest in placed:
            dest.unlink(missing_ok=True)
        for old, dest in aside:
            os.replace(old, dest)
        raise
    for old, _ in aside:
        old.unlink(missing_ok=True)
