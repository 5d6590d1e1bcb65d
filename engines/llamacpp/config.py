"""llama.cpp's flags: `--spec-draft-n-max` / `--spec-draft-n-min` (builds before 2026 spelled them
`--draft-max` / `--draft-min`, which current builds refuse: printed as a note);
`--spec-draft-p-min` is a draft-confidence cut-off that counts cannot set, so it is left to the
engine's default and said so.
"""
from __future__ import annotations

from typing import Any, Mapping

from specdec.simulator.engine_plan import EnginePlan


def configure(engine_plan: EnginePlan, method: str) -> dict[str, Any]:
    """The draft-length flags: the plan's best gamma as the longest draft, the shortest draft
    that still beats plain decoding as the shortest (`method` is not one llama.cpp names)."""
    plan = engine_plan.plan
    gamma = plan.optimal_gamma
    helps = [g for g in range(1, len(plan.walltime_improvement)) if plan.walltime_improvement[g] > 1.0]
    draft_min = min(helps) if helps else 0
    return {"engine": "llamacpp", "speculate": True, "draft_max": gamma, "draft_min": draft_min,
            "flags": f"--spec-draft-n-max {gamma} --spec-draft-n-min {draft_min}",
            "flags_older": f"--draft-max {gamma} --draft-min {draft_min}",
            "note": "--spec-draft-n-min: the shortest draft that still beats plain decoding; --spec-draft-p-min (the "
                    "draft's confidence cut-off) cannot be set from acceptance counts: keep the engine's default; "
                    "builds before 2026 spell the flags --draft-max / --draft-min, which current builds refuse"}


def config_lines(config: Mapping[str, Any]) -> list[str]:
    return [f"llama.cpp: {config['flags']}   (builds before 2026: {config['flags_older']})"]
