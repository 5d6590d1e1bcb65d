"""One bounded reader for the files a command takes (cost files, lattice studies, configs):
regular files only (a FIFO would block, a device such as /dev/zero never end), at most a cap of
bytes read whatever the file claims, strict UTF-8, and JSON whose numbers and nesting Python can
hold. Every problem is one SpecdecError line naming the file (torch-free)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from specdec.errors import SpecdecError
from specdec.paths import special_file
from specdec.strict_json import loads

MAX_INPUT_BYTES = 64 << 20  # a cost file, a study or a config.json is kilobytes to a few megabytes


def read_input(path: str | Path, cap: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the regular file `path`, at most `cap` bytes."""
    path = Path(path)
    kind = special_file(path)
    if kind and kind != "a symbolic link":
        raise SpecdecError(f"cannot read {path}: it is {kind}, not a file")
    if path.is_dir():
        raise SpecdecError(f"cannot read {path}: it is a folder, not a file")
    try:
        with path.open("rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise SpecdecError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _text(data, cap, str(path), "is larger than {mib} MiB: not a file of this kind")


def _text(data: bytes, cap: int, name: str, too_long: str) -> str:
    """`data` (at most cap + 1 bytes read) as UTF-8 text, or one line: too long or not UTF-8."""
    if len(data) > cap:
        raise SpecdecError(f"{name} {too_long.format(mib=cap >> 20)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecdecError(f"{name} is not UTF-8 text (byte {exc.start})") from None


def read_stdin(cap: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text on standard input, at most `cap` bytes; closed or unreadable: one line."""
    stream = sys.stdin
    if stream is None:
        raise SpecdecError("standard input is closed: pipe the text in or name a file")
    try:  # the bytes under a text stream (a replaced sys.stdin may be text only)
        data = stream.buffer.read(cap + 1) if hasattr(stream, "buffer") else stream.read(cap + 1).encode()
    except (OSError, ValueError) as exc:  # ValueError: a closed file object
        raise SpecdecError(f"cannot read standard input: {getattr(exc, 'strerror', None) or exc}") from None
    return _text(data, cap, "standard input", "holds more than {mib} MiB: give the metrics lines only")


def read_json(path: str | Path, cap: int = MAX_INPUT_BYTES) -> Any:
    """The JSON document in `path` (`read_input`), parsed strictly (`strict_json.loads`)."""
    text = read_input(path, cap)
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise SpecdecError(f"cannot read {path} as JSON: {exc}") from None
    except ValueError as exc:  # a number of more digits than Python converts
        raise SpecdecError(f"cannot read {path} as JSON: {exc}") from None
