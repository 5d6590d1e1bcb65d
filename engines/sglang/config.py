"""SGLang's server flags: `--speculative-algorithm` (vLLM's method names mapped: ngram -> NGRAM,
eagle -> EAGLE, eagle3 -> EAGLE3, draft_model -> STANDALONE, mtp -> NEXTN),
`--speculative-num-steps` gamma, `--speculative-eagle-topk 1` and
`--speculative-num-draft-tokens` gamma + 1 (a chain: SGLang forces num_draft_tokens = steps + 1
when topk = 1). SGLang takes one draft length, so a batch plan's ranges are a note. A tree plan
(`specdec eagle trees`) gives `--speculative-num-steps` depth, `--speculative-eagle-topk` K and
`--speculative-num-draft-tokens` N + 1: SGLang's EAGLE-2 tree keeps the N = num_draft_tokens - 1
best of its topk + (steps - 1) * topk^2 candidates, the verified token at the root.
Source: python/sglang/srt/server_args.py, speculative/eagle_utils.py (docs/engines.md).
"""
from __future__ import annotations

from typing import Any, Mapping

from specdec.engines.configs import DRAFT_PLACEHOLDER
from specdec.errors import SpecdecError
from specdec.simulator.engine_plan import EnginePlan

SGLANG_ALGORITHM = {"ngram": "NGRAM", "eagle": "EAGLE", "eagle3": "EAGLE3", "draft_model": "STANDALONE",
                    "mtp": "NEXTN", "nextn": "NEXTN"}


def configure(engine_plan: EnginePlan, method: str) -> dict[str, Any]:
    """SGLang's flags for a chain of gamma drafts (topk 1: num_draft_tokens = gamma + 1)."""
    if method not in SGLANG_ALGORITHM:
        raise SpecdecError(f"method {method!r} has no SGLang algorithm: choose one of {', '.join(SGLANG_ALGORITHM)}")
    gamma, ranges = engine_plan.plan.optimal_gamma, engine_plan.gamma_ranges
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


def config_lines(config: Mapping[str, Any]) -> list[str]:
    return [f"SGLang: {config['flags']}"]


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
