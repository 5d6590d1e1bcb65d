"""What engines read: a draft length (per batch-size range where the engine takes one).

- vLLM `--speculative-config` JSON: `method`, `num_speculative_tokens` and, with a batch plan,
  `num_speculative_tokens_per_batch_size` = [[start, end, k], ...] (inclusive ranges, k = 0:
  do not draft; every k <= num_speculative_tokens). Source: vllm/config/speculative.py and
  docs/features/speculative_decoding/dynamic_speculative_decoding.md (docs/engines.md).
  Methods that need draft weights (eagle, eagle3, draft_model, medusa, mlp_speculator) get a
  `"model"` placeholder to fill in.
- SGLang server flags: `--speculative-algorithm` (vLLM's method names mapped: ngram -> NGRAM,
  eagle -> EAGLE, eagle3 -> EAGLE3, draft_model -> STANDALONE, mtp -> NEXTN),
  `--speculative-num-steps` gamma, `--speculative-eagle-topk 1` and
  `--speculative-num-draft-tokens` gamma + 1 (a chain: SGLang forces num_draft_tokens = steps +
  1 when topk = 1). SGLang takes one draft length, so a batch plan's ranges are a note. A tree
  plan (`specdec eagle trees`) gives `--speculative-num-steps` depth, `--speculative-eagle-topk`
  K and `--speculative-num-draft-tokens` N + 1: SGLang's EAGLE-2 tree keeps the N = num_draft_tokens
  - 1 best of its topk + (steps - 1) * topk^2 candidates, the verified token at the root.
  Source: python/sglang/srt/server_args.py, speculative/eagle_utils.py (docs/engines.md).
- llama.cpp: `--spec-draft-n-max` / `--spec-draft-n-min` (builds before 2026 spelled them
  `--draft-max` / `--draft-min`, which current builds refuse: printed as a note);
  `--spec-draft-p-min` is a draft-confidence cut-off that counts cannot set, so it is left to
  the engine's default and said so.
- Hugging Face `generate`: `num_assistant_tokens` with `num_assistant_tokens_schedule="constant"`
  (a draft model), or `prompt_lookup_num_tokens` (prompt lookup).
"""
from __future__ import annotations

import json
from typing import Any

from specdec.errors import SpecdecError
from specdec.simulator.engine_plan import EnginePlan

ENGINES = ("vllm", "sglang", "llamacpp", "hf")
NEEDS_DRAFT_WEIGHTS = ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator")
SGLANG_ALGORITHM = {"ngram": "NGRAM", "eagle": "EAGLE", "eagle3": "EAGLE3", "draft_model": "STANDALONE",
                    "mtp": "NEXTN", "nextn": "NEXTN"}
DRAFT_PLACEHOLDER = "<draft weights>"


def engine_config(engine_plan: EnginePlan, engine: str, method: str = "ngram") -> dict[str, Any]:
    """The configuration to paste, as JSON-ready values under the engine's own names (their set
    differs per engine); no draft length beating plain decoding is said, not configured."""
    if engine not in ENGINES:
        raise SpecdecError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}")
    plan, ranges = engine_plan.plan, engine_plan.gamma_ranges
    gamma = plan.optimal_gamma
    top = max([gamma] + [int(r[2]) for r in ranges or []])
    if top == 0:
        return {"engine": engine, "speculate": False,
                "note": "no draft length beats plain decoding: leave speculative decoding off"}
    if engine == "vllm":
        config: dict[str, Any] = {"method": method, "num_speculative_tokens": top}
        if method in NEEDS_DRAFT_WEIGHTS:
            config["model"] = DRAFT_PLACEHOLDER
        if ranges:
            config["num_speculative_tokens_per_batch_size"] = [[int(a), int(b), int(k)] for a, b, k in ranges]
        return {"engine": engine, "speculate": True, "speculative_config": config,
                "flag": "--speculative-config '" + json.dumps(config, separators=(", ", ": ")) + "'",
                "note": "num_speculative_tokens_per_batch_size needs a vLLM with dynamic speculative decoding "
                        "(not with data parallelism > 1); ranges beyond the largest timed batch size are not planned"
                        if ranges else None}
    if engine == "sglang":
        return _sglang(gamma, ranges, method)
    if engine == "llamacpp":
        helps = [g for g in range(1, len(plan.walltime_improvement)) if plan.walltime_improvement[g] > 1.0]
        draft_min = min(helps) if helps else 0
        return {"engine": engine, "speculate": True, "draft_max": gamma, "draft_min": draft_min,
                "flags": f"--spec-draft-n-max {gamma} --spec-draft-n-min {draft_min}",
                "flags_older": f"--draft-max {gamma} --draft-min {draft_min}",
                "note": "--spec-draft-n-min: the shortest draft that still beats plain decoding; --spec-draft-p-min (the "
                        "draft's confidence cut-off) cannot be set from acceptance counts: keep the engine's default; "
                        "builds before 2026 spell the flags --draft-max / --draft-min, which current builds refuse"}
    if method in ("ngram", "lookup", "prompt_lookup"):
        args: dict[str, Any] = {"prompt_lookup_num_tokens": gamma}
    else:
        args = {"num_assistant_tokens": gamma, "num_assistant_tokens_schedule": "constant"}
    return {"engine": engine, "speculate": True, "generate_kwargs": args}


def _sglang(gamma: int, ranges, method: str) -> dict[str, Any]:
    """SGLang's flags for a chain of gamma drafts (topk 1: num_draft_tokens = gamma + 1)."""
    if method not in SGLANG_ALGORITHM:
        raise SpecdecError(f"method {method!r} has no SGLang algorithm: choose one of {', '.join(SGLANG_ALGORITHM)}")
    algorithm = SGLANG_ALGORITHM[method]
    flags = sglang_flags(algorithm, gamma, 1, gamma + 1)
    notes = []
    if ranges:
        notes.append("SGLang takes one draft length; the plan's draft length per batch-size range was "
                     + ", ".join(f"{a}-{b}: {k}" for a, b, k in ranges))
    if algorithm == "NGRAM":
        notes.append("NGRAM drafts a trie of up to num_draft_tokens - 1 nodes; its speculative_ngram_* options keep "
                     "their defaults")
    return {"engine": "sglang", "speculate": True, "algorithm": algorithm, "num_steps": gamma, "eagle_topk": 1,
            "num_draft_tokens": gamma + 1, "flags": flags, "note": "; ".join(notes) or None}


def sglang_flags(algorithm: str, steps: int, topk: int, draft_tokens: int) -> str:
    """SGLang's speculative flags: `steps` drafting steps (the depth), `topk` children expanded per
    node, `draft_tokens` verified per pass (the draft's nodes + the verified token)."""
    flags = (f"--speculative-algorithm {algorithm} --speculative-num-steps {steps} --speculative-eagle-topk {topk} "
             f"--speculative-num-draft-tokens {draft_tokens}")
    if algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):
        flags += f" --speculative-draft-model-path {DRAFT_PLACEHOLDER}"
    return flags


def sglang_tree(depth: int, topk: int, nodes: int, method: str = "eagle") -> dict[str, Any]:
    """SGLang's flags for an EAGLE-2 tree of `nodes` draft nodes, top-`topk`, `depth` steps (topk 1:
    the chain of `depth`)."""
    if method not in ("eagle", "eagle3"):
        raise SpecdecError(f"SGLang grows trees for eagle and eagle3 drafts, not {method!r}")
    algorithm = SGLANG_ALGORITHM[method]
    draft_tokens = depth + 1 if topk == 1 else nodes + 1
    return {"engine": "sglang", "speculate": True, "algorithm": algorithm, "num_steps": depth, "eagle_topk": topk,
            "num_draft_tokens": draft_tokens, "flags": sglang_flags(algorithm, depth, topk, draft_tokens),
            "note": None}
