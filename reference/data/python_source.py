"""Python source as training text: the running interpreter's standard library, cut into windows
of the target's token ids.

The code workload's prompts are 164 HumanEval tasks, 82 of them for training: the target's
answers to those are little text, and asking them again repeats it. The standard library is
~2.2 M tokens of Python (3.11: 452 files, 17,526 windows of 128) on every machine with no
download; the trained drafters learn the target's distribution over it (teacher-forced: the
text is not the target's own, as EAGLE's ShareGPT text is not Vicuna's). Measured gain and
cost: docs/eagle.md, "Python source".

Left out: tests, tooling that is not library code (idlelib, lib2to3, turtledemo, ensurepip),
the codec tables in `encodings` and the help text in `pydoc_data` (data, not code), and
site-packages (differs between machines). Windows are non-overlapping, taken in crc32 order of
(file, offset), so any n windows spread over the whole library and a larger n extends a smaller.
"""
from __future__ import annotations

import os
import platform
import sysconfig
import zlib
from pathlib import Path
from typing import Any

from specdec.errors import SpecdecError

LEFT_OUT = frozenset({"test", "tests", "idlelib", "lib2to3", "turtledemo", "ensurepip", "encodings", "pydoc_data",
                      "site-packages", "__pycache__"})
MAX_TOKENS = 4_000_000  # --code-tokens' bound: Python 3.11's library gives ~2.2 M tokens of windows (asking
# more than a library has is refused by python_windows with its count)


def library_files(root: Path) -> list[Path]:
    """The library's .py files under root, sorted, without the LEFT_OUT folders."""
    return sorted(p for p in root.rglob("*.py")
                  if not LEFT_OUT & set(p.relative_to(root).parts[:-1]) and not p.parent.name.startswith("config-"))


def python_windows(n: int, window: int, tokenizer_dir: str | os.PathLike | None = None, root: Path | None = None
                   ) -> tuple[list[list[int]], dict[str, Any]]:
    """(n windows of `window` token ids of the library's source under root (default: this
    interpreter's standard library), what was used).

    Raises:
        SpecdecError: the library has fewer than n whole windows.
    """
    from specdec.reference.data.corpus import encode, load_tokenizer

    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    files = library_files(root)
    tokenizer = load_tokenizer(tokenizer_dir)
    keyed: list[tuple[int, list[int]]] = []
    for start in range(0, len(files), 64):
        batch = files[start:start + 64]
        texts = [p.read_text(encoding="utf-8", errors="replace") for p in batch]
        for path, ids in zip(batch, encode(tokenizer, texts)):
            name = path.relative_to(root).as_posix()
            keyed.extend((zlib.crc32(f"{name}:{i}".encode()), ids[i:i + window])
                         for i in range(0, len(ids) - window + 1, window))
    if len(keyed) < n:
        raise SpecdecError(f"the Python library in {root} has {len(keyed)} windows of {window} tokens; asked for {n}")
    keyed.sort(key=lambda kv: kv[0])
    meta = {"python_source": str(root), "python_version": platform.python_version(), "python_files": len(files),
            "python_windows_available": len(keyed)}
    return [ids for _, ids in keyed[:n]], meta
