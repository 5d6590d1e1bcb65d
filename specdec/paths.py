"""Where specdec keeps what it builds: the one place for default paths (imports nothing).

The cache is `$SPECDEC_CACHE` when set, else `.cache/` in the checkout this package runs
from (an editable install, as `scripts/setup.sh` makes), else `~/.cache/specdec`.
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
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "reference").is_dir():
        return CHECKOUT / ".cache"
    return Path.home() / ".cache" / "specdec"


CACHE_DIR = cache_dir()
DEFAULT_TARGET_DIR = CACHE_DIR / "models" / "smollm2-135m-instruct"  # float32 SmolLM2-135M-Instruct
CORPUS_DIR = CACHE_DIR / "corpus"  # raw texts, normalised chunks, token ids, aligned corpora
KENLM_BIN_DIR = CACHE_DIR / "kenlm" / "bin"  # lmplz and build_binary built by scripts/setup.sh


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """Yield a scratch folder beside `out`; when the block completes, it replaces `out` in one
    rename (`replace_folder`); on any exception (KeyboardInterrupt too) the scratch folder goes
    and `out` is untouched."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.with_name(f".{out.name}.building-{os.getpid()}")
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
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        os.replace(out, old)
    os.replace(work, out)
    shutil.rmtree(old, ignore_errors=True)
