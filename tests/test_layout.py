"""The architecture's rules, checked from the code (docs/architecture.md):

- one import namespace: pyproject installs only `specdec` (no top-level `reference`,
  `figures`, ... in site-packages), and every package folder is mapped into it;
- dependency direction: `simulator` and `ngram` import nothing from `reference`, the CLI or
  the figures; the decode algorithm (`reference/core`) nothing of the model side
  (`reference/model`, transformers) but for type hints; the library never imports the CLI; no
  command imports another;
- modules stay small (at most 400 lines; the target is ~350);
- the seams (docs/architecture.md): no forward hooks in the library (data crosses a seam as a
  value), and no drafter capability decided by `isinstance` outside the drafter factory.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("simulator", "reference", "ngram", "figures", "engines")


def _imports(path: Path) -> set[str]:
    """Every module name a file imports (top level or inside functions)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def test_one_namespace() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert all(p == "specdec" or p.startswith("specdec.") for p in config["packages"])
    mapped = {name: ROOT / folder for name, folder in config["package-dir"].items()}
    for package in config["packages"]:  # each package resolves to a folder with an __init__.py
        head = max((n for n in mapped if package == n or package.startswith(n + ".")), key=len)
        folder = mapped[head].joinpath(*package[len(head):].split(".")[1:])
        assert (folder / "__init__.py").is_file(), package
    packaged = {str(f.parent.relative_to(ROOT)) for f in _files(*LIBRARY, "specdec") if f.name == "__init__.py"}
    covered = {str(mapped[head].joinpath(*p[len(head):].split(".")[1:]).relative_to(ROOT))
               for p in config["packages"]
               for head in [max((n for n in mapped if p == n or p.startswith(n + ".")), key=len)]}
    assert packaged <= covered, f"package folders not installed: {sorted(packaged - covered)}"


@pytest.mark.parametrize("folder", ["simulator", "ngram", "engines"])
def test_theory_ngram_and_engines_stand_alone(folder: str) -> None:
    for path in _files(folder):
        bad = {m for m in _imports(path) if m.startswith(("specdec.reference", "specdec.cli", "specdec.figures",
                                                           "specdec.engines", "specdec.ngram", "torch", "transformers"))}
        bad -= {m for m in bad if m.startswith(f"specdec.{folder}")}
        if folder == "ngram":  # KenLM tables may not need torch, but may use specdec.paths
            bad = {m for m in bad if not m.startswith("torch")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def _runtime_imports(path: Path) -> set[str]:
    """Every module name a file imports when it runs (what `if TYPE_CHECKING:` guards left out)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_algorithm_imports_no_model_code() -> None:
    """reference/core (seams, step, loops, rules, policies) reaches the model only through the
    scorer seam: models, caches and backends are below it, in reference/model."""
    for path in _files("reference/core"):
        bad = {m for m in _runtime_imports(path) if m.startswith(("specdec.reference.model", "transformers"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
    # and the check sees an import: the scorer below the seam does import the model side
    assert "specdec.reference.model.kv_session" in _runtime_imports(ROOT / "reference/model/target.py")


def test_library_never_imports_the_cli() -> None:
    for path in _files(*LIBRARY):
        bad = {m for m in _imports(path) if m.startswith("specdec.cli")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_no_command_imports_another() -> None:
    from specdec.cli import COMMANDS

    commands = {target.split(":")[0].split(".")[-1] for target in COMMANDS.values()}  # helpers (common, placement) are shared
    assert "placement" not in commands and "estimate" in commands
    for path in (ROOT / "specdec" / "cli").glob("*.py"):
        others = {m for m in _imports(path) if m.startswith("specdec.cli.") and m.split(".")[-1] in commands}
        assert not others - {f"specdec.cli.{path.stem}"}, f"{path.name} imports {sorted(others)}"


def test_modules_stay_small() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _files(*LIBRARY, "specdec")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def _calls(path: Path) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(path.read_text(), str(path))) if isinstance(n, ast.Call)]


def _name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def test_no_forward_hooks_in_the_library() -> None:
    for path in _files(*LIBRARY, "specdec"):
        hooks = [n.lineno for n in _calls(path) if _name(n.func).startswith("register_forward")]
        assert not hooks, f"{path.relative_to(ROOT)}:{hooks[0]} registers a forward hook: pass the data as a value"


def test_drafter_capabilities_are_not_decided_by_type() -> None:
    """`isinstance(x, ...Drafter)` only in the factory that builds drafters."""
    for path in _files(*LIBRARY, "specdec"):
        if path.name == "factory.py":
            continue
        for call in _calls(path):
            if _name(call.func) == "isinstance" and len(call.args) == 2:
                classes = call.args[1].elts if isinstance(call.args[1], ast.Tuple) else [call.args[1]]
                named = [_name(c) for c in classes if _name(c).endswith("Drafter")]
                assert not named, f"{path.relative_to(ROOT)}:{call.lineno} asks isinstance(..., {named[0]})"
