"""Writing a validation's results into a folder: validation.json, validation.md and the figures
(one category: the plain validation's figures; several: the by-category figure).
Everything is rendered first, into a scratch folder beside the files, and then published
together (`specdec.paths.publishing`): a failure while rendering (a figure, the report) or
while renaming leaves the folder as it was, and no file is ever half written."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from specdec.paths import publishing
from specdec.reference.validation.suite import ValidationSuite
from specdec.reference.validation.suite_report import suite_report
from specdec.strict_json import to_json

def write_results(suite: ValidationSuite, out: Path, figures: bool = True) -> dict[str, Any]:
    """Write the suite into `out` (which must exist); returns its JSON report, whose "figures"
    lists the PNGs written."""
    report = suite.to_dict()
    with publishing(out) as work:
        names = []
        if figures:
            if suite.single is not None:
                from specdec.figures.validation import write_all
                names = [Path(p).name for p in write_all(suite.single, work)]
            else:
                from specdec.figures.categories import figure_by_category
                names = [figure_by_category(suite, work).name]
        report["figures"] = [str(out / name) for name in names]
        (work / "validation.md").write_text(suite_report(suite) + "\n", encoding="utf-8")
        (work / "validation.json").write_text(to_json(report, indent=1) + "\n", encoding="utf-8")
    return report
