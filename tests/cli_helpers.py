"""Running the real command line in process, and reading its JSON strictly (shared by the CLI tests)."""
from __future__ import annotations

import json

from specdec.cli import main


def run_main(capsys, argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one real command line; never a traceback."""
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "Traceback" not in out.out
    return code, out.out, out.err


def refuse_constant(name: str):
    raise ValueError(f"non-strict JSON constant {name}")


def strict_json(text: str) -> dict:
    """json.loads that refuses NaN and Infinity."""
    return json.loads(text, parse_constant=refuse_constant)
