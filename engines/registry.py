"""The serving engines specdec knows, in one place. Each is a package `engines/<name>/` whose
`__init__` satisfies `Engine`: what it reports read into counts (its `metrics` module), what
it reads written out (its `config` module) and, where specdec runs the engine itself, its
process and client (`engines/llamacpp/server.py`, `client.py`). The CLI's `--engine` choices,
the format detection (`specdec.engines.metrics`) and the report (`specdec.report`) read this
registry; nothing else names an engine. Adding one: docs/architecture.md, "How to add an engine".
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Mapping, Protocol, runtime_checkable

from specdec.errors import SpecdecError

if TYPE_CHECKING:
    from specdec.engines.counts import EngineCounts
    from specdec.simulator.engine_plan import EnginePlan

# The built-in engines, one package each, in the order the format detection tries them.
BUILTIN = ("vllm", "sglang", "llamacpp", "hf")
_added: dict[str, "Engine"] = {}  # engines registered at run time (`register`), after the built-in ones


@runtime_checkable
class Engine(Protocol):
    """What the registry needs of an engine (an engine package's module satisfies it)."""

    name: str  # the --engine choice, and the prefix of the `EngineCounts.source` its parsers set
    label: str  # how reports and messages name the engine ("vLLM")
    text_formats: str | None  # what `parse_text` reads, said in help and errors; None: no text format
    json_formats: str | None  # what `parse_json` reads; None: no JSON format
    # optional: equal_split_batches = True when B slots' unequal feeds decode as equal micro-batches

    def parse_text(self, text: str) -> EngineCounts | None:
        """The counts in `text` if it is this engine's text output, else None (errors: SpecdecError)."""

    def parse_json(self, objects: list) -> EngineCounts | None:
        """The counts in these JSON values if they are this engine's, else None."""

    def configure(self, engine_plan: EnginePlan, method: str) -> dict[str, Any]:
        """What the engine reads for a plan that speculates, as JSON-ready values with "engine",
        "speculate" and "note" keys."""

    def config_lines(self, config: Mapping[str, Any]) -> list[str]:
        """`config` (this engine's) as the text lines to paste, its note left to the caller."""


def names() -> tuple[str, ...]:
    """Every engine's name (the --engine choices), without importing any engine."""
    return BUILTIN + tuple(n for n in _added if n not in BUILTIN)


def get(name: str) -> Engine:
    """The engine called `name`, else one SpecdecError naming the choices."""
    if name in _added:
        return _added[name]
    if name not in BUILTIN:
        raise SpecdecError(f"unknown engine {name!r}: choose one of {', '.join(names())}")
    return importlib.import_module(f"specdec.engines.{name}")  # type: ignore[return-value]


def engines() -> list[Engine]:
    """Every engine, in the order the format detection tries them."""
    return [get(n) for n in names()]


def splits_batches(name: str | None) -> bool:
    """Whether the engine decodes B slots that feed unequal token counts as equal micro-batches
    (its module's optional `equal_split_batches`, default False): its batch table is then priced by
    `specdec.simulator.equal_split`."""
    return name is not None and bool(getattr(get(name), "equal_split_batches", False))


def engine_of_source(source: str) -> str | None:
    """The engine whose parser wrote this `EngineCounts.source` ("vllm-prometheus" -> "vllm"), or None."""
    head = source.split("-")[0]
    return head if head in names() else None


def register(engine: Engine) -> Engine:
    """Add an engine that lives outside this package (tests register a toy); returns it."""
    if not isinstance(engine, Engine):
        raise SpecdecError(f"{engine!r} lacks what an engine needs (name, label, formats, parsers, config)")
    if engine.name in BUILTIN or not engine.name.isidentifier():
        raise SpecdecError(f"cannot register an engine named {engine.name!r}")
    _added[engine.name] = engine
    return engine


def unregister(name: str) -> None:
    """Remove an engine `register` added (no-op when absent)."""
    _added.pop(name, None)


def formats_text() -> str:
    """Every engine's text formats, for help and the 'unrecognised input' message."""
    return ", ".join(e.text_formats for e in engines() if e.text_formats)


def formats_json() -> str:
    """Every engine's JSON formats, likewise."""
    return ", ".join(e.json_formats for e in engines() if e.json_formats)
