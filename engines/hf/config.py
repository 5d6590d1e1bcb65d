"""Hugging Face `generate`'s keyword arguments: `num_assistant_tokens` with
`num_assistant_tokens_schedule="constant"` (a draft model), or `prompt_lookup_num_tokens`
(prompt lookup)."""
from __future__ import annotations

from typing import Any, Mapping

from specdec.simulator.engine_plan import EnginePlan


def configure(engine_plan: EnginePlan, method: str) -> dict[str, Any]:
    """generate()'s arguments for the plan's best gamma; `method` ngram (lookup) is prompt lookup,
    anything else an assistant model."""
    gamma = engine_plan.plan.optimal_gamma
    if method in ("ngram", "lookup", "prompt_lookup"):
        args: dict[str, Any] = {"prompt_lookup_num_tokens": gamma}
    else:
        args = {"num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant"}
    return {"engine": "hf", "speculate": True, "generate_kwargs": args}


def config_lines(config: Mapping[str, Any]) -> list[str]:
    return ["transformers generate(..., " + ", ".join(f"{k}={v!r}" for k, v in config["generate_kwargs"].items()) + ")"]
