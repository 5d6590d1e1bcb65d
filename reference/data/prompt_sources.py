"""Prompts as the user's traffic has them, before any tokenizer: a `Prompt` is a text with its
category and whether it is a user turn (a chat template applies to turns) or plain text to
continue. Read from a file here; the embedded workloads build them in
`specdec.reference.data.workloads`. Formats: docs/workloads.md.
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from specdec.errors import SpecdecError
from specdec.strict_json import loads

FILE_CATEGORY = "file"  # the category of a prompt whose line names none
MAX_PROMPTS_FILE_BYTES = 256 << 20  # a benchmark's prompts are megabytes at most


@dataclass(frozen=True)
class Prompt:
    """text: the user's first turn, or the text to continue; category: the workload it belongs to;
    name: where it came from (file:line, workload/id); turn: True for a user turn; ids: the exact
    token ids of a plain-text prompt cut from the tokenized corpus (None: encode `text`)."""

    text: str
    category: str
    name: str
    turn: bool
    ids: tuple[int, ...] | None = None


def read_prompts_file(path: str | os.PathLike) -> list[Prompt]:
    """Prompts from a file: JSON lines when the first non-blank line starts with "{" (one
    object a line: MT-bench / Spec-Bench `{"question_id", "category", "turns": [...]}`, first
    turn, or `{"prompt": "...", "category": "..."}`; newlines inside kept), else plain text,
    one prompt a line (blank lines skipped). JSON prompts are user turns; plain lines and
    `{"prompt"}` objects with `"turn": false` are text to continue.

    Raises:
        SpecdecError: missing, not UTF-8, a line that is not a prompt object, or no prompt.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecdecError(f"prompts file {str(path)!r} not found")
    if path.stat().st_size > MAX_PROMPTS_FILE_BYTES:
        raise SpecdecError(f"prompts file {str(path)!r} is larger than {MAX_PROMPTS_FILE_BYTES >> 20} MiB")
    stat = path.stat()
    return list(_read(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=2)
def _read(path: Path, mtime_ns: int, size: int) -> tuple[Prompt, ...]:
    """A prompts file's prompts, read once per command while the file is unchanged (the option's
    check, the length check and the preflight share one read)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecdecError(f"prompts file {str(path)!r} is not valid UTF-8 (byte {exc.start})") from None
    lines = text.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("{"):
        prompts = [_json_prompt(path, number, line) for number, line in enumerate(lines, 1) if line.strip()]
    else:
        prompts = [Prompt(line.strip(), FILE_CATEGORY, f"{path.name}:{number}", False)
                   for number, line in enumerate(lines, 1) if line.strip()]
    if not prompts:
        raise SpecdecError(f"prompts file {str(path)!r} holds no prompt")
    return tuple(prompts)


def _json_prompt(path: Path, number: int, line: str) -> Prompt:
    where = f"prompts file {str(path)!r} line {number}"
    try:
        row = loads(line)
    except json.JSONDecodeError as exc:
        raise SpecdecError(f"{where}: not JSON ({exc.msg})") from None
    except ValueError as exc:  # a number of more digits than Python converts
        raise SpecdecError(f"{where}: not JSON Python can hold ({exc})") from None
    if not isinstance(row, dict):
        raise SpecdecError(f"{where}: a JSON object is needed, got {type(row).__name__}")
    category = row.get("category", FILE_CATEGORY)
    if not isinstance(category, str) or not category.strip():
        raise SpecdecError(f"{where}: \"category\" must be a non-empty string")
    if "turns" in row:
        turns = row["turns"]
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            raise SpecdecError(f"{where}: \"turns\" must be a non-empty list of strings")
        text, turn = turns[0], True
    elif "prompt" in row:
        text, turn = row["prompt"], row.get("turn", True)
        if not isinstance(text, str) or not isinstance(turn, bool):
            raise SpecdecError(f"{where}: \"prompt\" must be a string and \"turn\" true or false")
    else:
        raise SpecdecError(f"{where}: needs \"turns\" (MT-bench / Spec-Bench) or \"prompt\"")
    for value in (category, text):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # JSON's "\ud800" escapes decode to a lone surrogate
            raise SpecdecError(f"{where}: holds a lone surrogate {value[exc.start]!r}, not text") from None
    if not text.strip():
        raise SpecdecError(f"{where}: the prompt is empty")
    name = row.get("question_id", row.get("id", number))
    return Prompt(text, category.strip(), f"{path.name}:{name}", turn)


def select_categories(prompts: Sequence[Prompt], categories: Sequence[str] | None) -> list[Prompt]:
    """The prompts of the named categories (all when None), in file order.

    Raises:
        SpecdecError: a named category has no prompt (the message lists those there are).
    """
    if not categories:
        return list(prompts)
    present = sorted({p.category for p in prompts})
    missing = [c for c in categories if c not in present]
    if missing:
        raise SpecdecError(f"no prompt of category {missing[0]!r}; the prompts have: {', '.join(present)}")
    return [p for p in prompts if p.category in set(categories)]
