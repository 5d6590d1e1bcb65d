"""vLLM's `--speculative-config` JSON: `method`, `num_speculative_tokens` and, with a batch plan,
`num_speculative_tokens_per_batch_size` = [[start, end, k], ...] (inclusive ranges, k = 0: do
not draft; every k <= num_speculative_tokens). Source: vllm/config/speculative.py and
docs/features/speculative_decoding/dynamic_speculative_decoding.md (docs/engines.md). Methods
that need draft weights (eagle, eagle3, draft_model, medusa, mlp_speculator) get a `"model"`
placeholder to fill in.
"""
from __future__ import annotations

import json
import shlex
from typing import Any, Mapping

from specdec.engines.configs import DRAFT_PLACEHOLDER, NEEDS_DRAFT_WEIGHTS, longest_draft
from specdec.errors import SpecdecError
from specdec.simulator.engine_plan import EnginePlan


# vLLM's method names (vllm/config/speculative.py's SpeculativeMethod), the only ones printed
METHODS = ("ngram", "draft_model", "eagle", "eagle3", "mtp", "deepseek_mtp", "medusa", "mlp_speculator", "suffix")


def configure(engine_plan: EnginePlan, method: str) -> dict[str, Any]:
    """The `--speculative-config` flag for the plan's draft length (per batch-size range when planned),
    quoted for a POSIX shell (`shlex.quote`: the line round-trips through `shlex.split`)."""
    if method not in METHODS:
        raise SpecdecError(f"method {method!r} is not one of vLLM's: {', '.join(METHODS)}")
    ranges = engine_plan.gamma_ranges
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": longest_draft(engine_plan)}
    if method in NEEDS_DRAFT_WEIGHTS:
        spec["model"] = DRAFT_PLACEHOLDER
    if ranges:
        spec["num_speculative_tokens_per_batch_size"] = [[int(a), int(b), int(k)] for a, b, k in ranges]
    return {"engine": "vllm", "speculate": True, "speculative_config": spec,
            "flag": "--speculative-config " + shlex.quote(json.dumps(spec, separators=(", ", ": "))),
            "note": "num_speculative_tokens_per_batch_size needs a vLLM with dynamic speculative decoding "
                    "(not with data parallelism > 1); ranges beyond the largest timed batch size are not planned"
                    if ranges else None}


def config_lines(config: Mapping[str, Any]) -> list[str]:
    return [f"vLLM: {config['flag']}"]
