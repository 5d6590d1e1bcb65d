"""The engine registry (specdec.engines.registry): every engine is one package behind one
protocol, and the CLI's choices, the format detection and the report read the registry alone.

- A toy engine registered at run time (one object, one `register` call) is an --engine choice,
  its format is recognised by `plan --from`, its counts default to its configuration and the
  report prints its lines; unregistered, it is refused like any unknown name.
- The built-in engine packages satisfy the protocol; no engine's name or label is written in
  specdec/cli/plan.py or specdec/report.py.
- The old import spellings keep working (engines were single modules before).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import pytest

from specdec.engines import registry
from specdec.engines.counts import EngineCounts
from specdec.engines.metrics import read_counts
from tests.cli_helpers import run_main, strict_json

ROOT = Path(__file__).resolve().parent.parent


class ToyEngine:
    """An engine that reports "toy accepted A of R" per position and reads "--toy-draft G"."""

    name = "toy"
    label = "Toy"
    text_formats = "'toy accepted' lines"
    json_formats = None

    def parse_text(self, text: str) -> EngineCounts | None:
        rows = re.findall(r"^toy accepted (\d+) of (\d+)$", text, re.M)
        if not rows:
            return None
        return EngineCounts("toy-log", [int(a) for a, _ in rows], [int(r) for _, r in rows], int(rows[0][1]),
                            k=len(rows))

    def parse_json(self, objects: list) -> EngineCounts | None:
        return None

    def configure(self, engine_plan, method: str) -> dict[str, Any]:
        return {"engine": "toy", "speculate": True, "gamma": engine_plan.plan.optimal_gamma, "note": None}

    def config_lines(self, config: Mapping[str, Any]) -> list[str]:
        return [f"Toy: --toy-draft {config['gamma']}"]


@pytest.fixture
def toy():
    engine = registry.register(ToyEngine())
    yield engine
    registry.unregister("toy")


def test_a_toy_engine_is_one_object_and_one_registration(toy, capsys, tmp_path) -> None:
    log = tmp_path / "toy.log"
    log.write_text("toy accepted 80 of 100\ntoy accepted 60 of 80\n")
    counts = read_counts(log.read_text())
    assert (counts.source, counts.engine, counts.accepted, counts.reached) == ("toy-log", "toy", [80, 60], [100, 80])
    code, out, _ = run_main(capsys, ["plan", "--from", str(log), "--c", "0", "--json"])
    assert code == 0 and strict_json(out)["engine_config"] == {"engine": "toy", "speculate": True, "gamma": 2,
                                                                "note": None}
    code, out, _ = run_main(capsys, ["plan", "--from", str(log), "--c", "0"])
    assert code == 0 and out.rstrip().endswith("Toy: --toy-draft 2")
    vllm = ROOT / "tests" / "fixtures" / "engines" / "vllm_metrics.txt"  # another engine's counts, the toy's flags
    code, out, _ = run_main(capsys, ["plan", "--from", str(vllm), "--c", "0", "--engine", "toy"])
    assert code == 0 and "Toy: --toy-draft 3" in out
    code, out, _ = run_main(capsys, ["plan", "--help"])
    assert "[vllm|sglang|llamacpp|hf|toy]" in out
    registry.unregister("toy")
    code, _, err = run_main(capsys, ["plan", "--from", str(vllm), "--c", "0", "--engine", "toy"])
    assert code == 2 and "--engine" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="unrecognised input"):
        read_counts(log.read_text())


def test_registration_is_checked() -> None:
    with pytest.raises(ValueError, match="lacks what an engine needs"):
        registry.register(object())  # type: ignore[arg-type]
    clash = ToyEngine()
    clash.name = "vllm"
    with pytest.raises(ValueError, match="cannot register"):
        registry.register(clash)
    with pytest.raises(ValueError, match="unknown engine 'nope': choose one of vllm, sglang, llamacpp, hf"):
        registry.get("nope")


def test_builtin_engines_are_packages_behind_the_protocol() -> None:
    for name in registry.BUILTIN:
        engine = registry.get(name)
        assert isinstance(engine, registry.Engine) and engine.name == name
        assert (ROOT / "engines" / name / "__init__.py").is_file()
        assert (ROOT / "engines" / name / "config.py").is_file()


def test_no_engine_is_named_outside_the_registry() -> None:
    words = [w for e in registry.engines() for w in (e.name, e.label)] + ["llama", "llama-server"]
    for path in ("specdec/cli/plan.py", "specdec/report.py"):
        text = (ROOT / path).read_text()
        named = [w for w in words if re.search(r"(?<![\w.-])" + re.escape(w) + r"(?![\w-])", text, re.I)]
        assert not named, f"{path} names {named}"


def test_old_spellings_still_import() -> None:
    from specdec.engines import llamacpp, sglang, vllm
    from specdec.engines.configs import ENGINES, SGLANG_ALGORITHM, sglang_flags, sglang_tree

    assert ENGINES == ("vllm", "sglang", "llamacpp", "hf") and SGLANG_ALGORITHM["eagle3"] == "EAGLE3"
    assert sglang_tree(3, 1, 3)["flags"] == sglang_flags("EAGLE", 3, 1, 4)
    assert callable(vllm.parse_prometheus) and callable(vllm.parse_vllm_v1_log) and callable(sglang.parse_json)
    assert llamacpp.parse_text("nothing here") is None
