"""A module written at run time and imported under its name: how the extension tests add a toy
drafter kind or draft-length rule by "one module and one registry line"."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_toy(folder: Path, name: str, text: str, monkeypatch) -> ModuleType:
    """Write `text` to folder/name.py and import it as `name` (removed from sys.modules after the test)."""
    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module
