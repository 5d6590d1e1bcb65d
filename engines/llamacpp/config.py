"""llama.cpp's flags: `--spec-draft-n-max` / `--spec-draft-n-min` (builds before 2026 spelled them
`--draft-max` / `--draft-min`, which current builds refuse: printed as a note);
`--spec-draft-p-min` is a draft-confidence cut-off that counts cannot set, so it is left to the
engine's default and said so.

The n-gram types ignore `--spec-draft-n-max` (vendored 0c1e570: `common_speculative_n_max` takes
ngram-simple's `size_m`, ngram-mod's `n_max`; the slot's limit is only the tokens left). Their draft
length has flags of its own, written beside: ngram-simple `--spec-ngram-simple-size-m γ` with a
lookup `--spec-ngram-simple-size-n` of at most γ (a longer lookup never drafts:
`common_ngram_simple_draft` returns nothing when copy_max < size_n), ngram-mod
`--spec-ngram-mod-n-max γ`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from specdec.simulator.engine_plan import EnginePlan


NGRAM_SIZE_N = 3  # ngram-simple's lookup length the flags write (the engine's default, 12, needs drafts >= 12)


def ngram_flags(gamma: int) -> dict[str, str]:
    """The flags that make each n-gram type draft at most gamma tokens."""
    return {"ngram-simple": f"--spec-type ngram-simple --spec-ngram-simple-size-n {min(NGRAM_SIZE_N, gamma)} "
                            f"--spec-ngram-simple-size-m {gamma}",
            "ngram-mod": f"--spec-type ngram-mod --spec-ngram-mod-n-min 1 --spec-ngram-mod-n-max {gamma}"}


def ngram_simple_gamma(speedups: Sequence[float]) -> int:
    """The best draft length ngram-simple can run with the acceptance its counts measured: it never
    drafts fewer tokens than its lookup (`copy_max < size_n` returns no draft), so a gamma below
    NGRAM_SIZE_N would shorten the lookup too (size-n = gamma), a different drafter whose acceptance
    the counts (taken at size-n NGRAM_SIZE_N) do not describe — measured 0.83x where 1.01x was
    planned at gamma 1 (2026-11-26); 0: do not speculate with it."""
    allowed = [g for g in range(len(speedups)) if g == 0 or g >= NGRAM_SIZE_N]
    return max(allowed, key=lambda g: (speedups[g], -g))


def configure(engine_plan: EnginePlan, method: str) -> dict[str, Any]:
    """The draft-length flags: the plan's best gamma as the longest draft, the shortest draft
    that still beats plain decoding as the shortest (`method` is not one llama.cpp names); for
    the n-gram types their own flags, ngram-simple at its best gamma of at least its lookup
    (`ngram_simple_gamma`)."""
    plan = engine_plan.plan
    gamma = plan.optimal_gamma
    helps = [g for g in range(1, len(plan.walltime_improvement)) if plan.walltime_improvement[g] > 1.0]
    draft_min = min(helps) if helps else 0
    simple = ngram_simple_gamma(plan.walltime_improvement)
    flags_ngram = {**({"ngram-simple": ngram_flags(simple)["ngram-simple"]} if simple else {}),
                   **({"ngram-mod": ngram_flags(gamma)["ngram-mod"]} if gamma else {})}
    return {"engine": "llamacpp", "speculate": True, "draft_max": gamma, "draft_min": draft_min,
            "flags": f"--spec-draft-n-max {gamma} --spec-draft-n-min {draft_min}",
            "flags_older": f"--draft-max {gamma} --draft-min {draft_min}",
            "flags_ngram": flags_ngram, "gamma_ngram_simple": simple,
            "note": "--spec-draft-n-min: the shortest draft that still beats plain decoding; --spec-draft-p-min (the "
                    "draft's confidence cut-off) cannot be set from acceptance counts: keep the engine's default; "
                    "builds before 2026 spell the flags --draft-max / --draft-min, which current builds refuse"}


def config_lines(config: Mapping[str, Any]) -> list[str]:
    lines = [f"llama.cpp: {config['flags']}   (builds before 2026: {config['flags_older']})"]
    for spec_type, flags in (config.get("flags_ngram") or {}).items():
        lines.append(f"llama.cpp {spec_type} (ignores --spec-draft-n-max): {flags}")
    simple = config.get("gamma_ngram_simple")
    if simple is not None and simple != config.get("draft_max"):
        lines.append(f"note: ngram-simple cannot draft fewer tokens than its {NGRAM_SIZE_N}-token lookup (a shorter "
                     f"draft would shorten the lookup, a drafter these counts do not describe): "
                     + (f"its best gamma is {simple}" if simple else "it does not pay at these counts"))
    return lines
