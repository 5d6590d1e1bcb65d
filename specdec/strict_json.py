"""Strict JSON for everything specdec prints or writes: undefined rates (NaN) and infinities
are null, never the non-standard NaN / Infinity tokens (imports nothing of the project)."""
from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """The value with every NaN / infinite float (nested in dicts, lists, tuples) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def loads(text: str | bytes) -> Any:
    """`json.loads` for files a user hands over: a document nested too deeply for the parser
    (RecursionError) is a JSONDecodeError like any other malformed JSON, so every reader's
    one-line refusal covers it."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None


def to_json(value: Any, indent: int | None = None) -> str:
    """Strict JSON: undefined rates are null, never NaN or Infinity."""
    return json.dumps(finite_or_none(value), indent=indent, allow_nan=False)
