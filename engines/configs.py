"""What engines read: a draft length (per batch-size range where the engine takes one), written
by each engine's `config` module (`engines/<name>/config.py`, where its sources are quoted)
and dispatched here through the registry (`specdec.engines.registry`). What every engine's
configuration shares lives here: no speculation when no draft length beats plain decoding,
the longest draft a plan asks for, the methods that need draft weights and their placeholder.
"""
from __future__ import annotations

from typing import Any

from specdec.engines import registry
from specdec.simulator.engine_plan import EnginePlan

ENGINES = registry.BUILTIN  # the built-in engines' names (registry.names() adds registered ones)
NEEDS_DRAFT_WEIGHTS = ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator")
DRAFT_PLACEHOLDER = "<draft weights>"


def longest_draft(engine_plan: EnginePlan) -> int:
    """The longest draft the plan asks for: its best gamma, or a batch-size range's longer one."""
    return max([engine_plan.plan.optimal_gamma] + [int(r[2]) for r in engine_plan.gamma_ranges or []])


def engine_config(engine_plan: EnginePlan, engine: str, method: str = "ngram") -> dict[str, Any]:
    """The configuration to paste, as JSON-ready values under the engine's own names (their set
    differs per engine); no draft length beating plain decoding is said, not configured."""
    writer = registry.get(engine)
    if longest_draft(engine_plan) == 0:
        return {"engine": engine, "speculate": False,
                "note": "no draft length beats plain decoding: leave speculative decoding off"}
    return writer.configure(engine_plan, method)


def __getattr__(name: str) -> Any:
    """The SGLang writers' old home (`specdec.engines.configs.sglang_tree`, ...): now `engines/sglang/`."""
    if name in ("SGLANG_ALGORITHM", "sglang_flags", "sglang_tree"):
        from specdec.engines.sglang import config as sglang_config
        return getattr(sglang_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
