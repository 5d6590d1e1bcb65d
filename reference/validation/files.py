"""Writing a validation's results: validation.json, validation.md and the figures, into a folder,
all of them or none (each is rendered first, then moved into place)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from specdec.reference.validation.report import full_report
from specdec.reference.validation.rows import ValidationResult
from specdec.strict_json import to_json


def write_results(result: ValidationResult, out: Path, figures: bool = True) -> dict[str, Any]:
    """Write the result into `out` (which must exist); returns its JSON report, whose "figures"
    lists the PNGs written."""
    from specdec.paths import write_atomic

    report = result.to_dict()
    scratch = out / f".validation-{os.getpid()}"
    scratch.mkdir()
    try:
        names = []
        if figures:
            from specdec.figures.validation import write_all
            names = [Path(p).name for p in write_all(result, scratch)]
        for name in names:
            os.replace(scratch / name, out / name)
        report["figures"] = [str(out / name) for name in names]
        write_atomic(out / "validation.md", full_report(result) + "\n")
        write_atomic(out / "validation.json", to_json(report, indent=1) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report
