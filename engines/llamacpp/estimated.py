"""Prediction (b): a configuration's speedup in llama-server from specdec's estimator alone — the
reference decoder's teacher-forced passes on the same prompts (`specdec estimate --json`, its
"replay": tokens per iteration and the law of the draft tokens verified per iteration at each
gamma, a chain's proposal length, exact at T = 0)
— priced at the engine's own costs (`costs.py`). Nothing from the engine's speculative runs.

Per request of the configuration (its category's estimate, its context L), with E tokens per
iteration and P(k) the share of iterations that draft k tokens, as the replay gives them at the
configuration's gamma:

    seconds per token = (sum_k P(k) [t(1 + k, L) + P0 + k (P1 + s)] + (E - 1) c_acc) / E,

P0, P1, s the draft model's batch pass, its tokens and a look in the engine's loop (`draft_loop.py`;
0 without one; `validation.py` prices it the same way), and the
speedup = sum over requests of (n - 1) t(1, L) / sum of (n - 1) seconds per token. A draft model
with a confidence cut-off (--spec-draft-p-min tau > 0) stops where the replay cannot say: there
P(k), E and the draft's forwards F per iteration come from the estimate's joint law of confidence
and acceptance per position (`simulator.dynamic.threshold_prediction`, the confidence renormalised
over the draft's top 10 as the engine's sampler does: `specdec estimate --confidence-top-k 10`),
and an iteration's looks are F (its draft passes: P0 + P1 E[k] + s F). Synthetic
acceptance (`--spec-synth-rates P_1..P_gamma`, unconditional rates) is known exactly: there
E = 1 + sum_k P(k) sum_{i <= k} P_i, with P(k) from the estimate of the drafter that proposes
(for `ngram-simple --spec-ngram-simple-size-n 1`: prompt lookup on the last token, `lookup:1`).

Which estimate matches which engine drafter: the draft model's GGUF and its HF folder
(`model:DIR`: the same weights, before llama.cpp's quantization); ngram-simple with a lookup
of N tokens and `llamacpp:ngram-simple:N`, ngram-mod and `llamacpp:ngram-mod:N:MIN` (llama.cpp's
rules, `specdec.reference.drafters.llamacpp_ngram`: checked against a real server's counters).
specdec's `lookup:1` is ngram-simple's N = 1 up to an edge (it may copy from the occurrence one
token back); its `lookup:N` falls back to shorter n-grams, llama.cpp's never does.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from specdec.engines.llamacpp.validation import DRAFT_TOP_K, Config, EngineCosts, Record
from specdec.errors import SpecdecError


def gamma_of(config: Config) -> int:
    """The longest draft the configuration makes (what the replay is read at)."""
    rates = config.flag("--spec-synth-rates")
    if rates is not None:
        return len(rates.split(","))
    names = {"ngram-simple": ("--spec-ngram-simple-size-m",), "ngram-mod": ("--spec-ngram-mod-n-max",)}
    value = config.flag(*names.get(config.spec_type, ("--spec-draft-n-max", "--draft-max", "--draft")))
    if value is None:
        raise SpecdecError(f"{config.label}: no draft length in its flags for prediction (b)")
    return int(value)


def synthetic_rates(config: Config) -> list[float] | None:
    rates = config.flag("--spec-synth-rates")
    return None if rates is None else [float(x) for x in rates.split(",")]


@dataclass(frozen=True)
class Estimated:
    """One category of an estimate, as prediction (b) reads it: per iteration P(k) for k =
    0..gamma, E tokens, and the draft model's looks (None: k, a draft stopped by its length)."""

    proposed: np.ndarray
    tokens: float
    looks: float | None = None


def category_estimates(estimate: dict, config: Config, path: Path) -> dict[str, Estimated]:
    """{category: Estimated} of a `specdec estimate --json` output (one category or several) for
    the configuration: its replay at its gamma, or at a p-min above 0 its confidence law."""
    from specdec.simulator.dynamic import confidence_law, threshold_prediction

    reports = estimate["categories"] if "categories" in estimate else {estimate.get("category", ""): estimate}
    gamma, rates = gamma_of(config), synthetic_rates(config)
    out = {}
    for category, report in reports.items():
        if config.draft_model is not None and config.p_min > 0:
            d = report.get("confidence_law")
            if not d or d.get("top_k") != DRAFT_TOP_K:
                raise SpecdecError(f"{path}: no confidence law over the draft's top {DRAFT_TOP_K} for {category!r} "
                                   f"(`specdec estimate --confidence-top-k {DRAFT_TOP_K}`, this version)")
            law = confidence_law(d)
            if law is None:
                raise SpecdecError(f"{path}: its confidence law for {category!r} counts nothing")
            p = threshold_prediction(law, [config.p_min], 0, gamma, 0.0)
            out[category] = Estimated(p.length_law[0], float(p.expected_tokens[0]), float(p.expected_forwards[0]))
            continue
        replay = (report.get("replay") or {}).get(str(gamma))
        if replay is None or "proposed" not in replay:
            raise SpecdecError(f"{path}: no replay at gamma {gamma} with the proposal law for {category!r} "
                               "(`specdec estimate --max-k` above gamma, this version)")
        if len(replay["proposed"]) > gamma + 1:  # a token tree's nodes: llama.cpp verifies chains
            raise SpecdecError(f"{path}: the estimate of a token-tree drafter; llama.cpp drafts chains")
        proposed, tokens = iteration(replay, rates)
        out[category] = Estimated(proposed, tokens)
    return out


def iteration(replay: dict, rates: list[float] | None) -> tuple[np.ndarray, float]:
    """(P(k) for k = 0..gamma drafts verified, E tokens per iteration)."""
    proposed = np.asarray(replay["proposed"], dtype=float)
    proposed = proposed / proposed.sum()
    if rates is None:
        return proposed, float(replay["tokens_per_iteration"])
    reach = np.concatenate([[0.0], np.cumsum(rates)])  # expected accepted drafts of a k-draft, k = 0..gamma
    return proposed, 1.0 + float(proposed @ reach[:proposed.size])


def predicted_b(config: Config, records: Sequence[Record], estimated: dict[str, Estimated],
                costs: EngineCosts) -> float:
    """Prediction (b) of one configuration over its requests (module doc)."""
    base = spec = 0.0
    for r in records:
        if r.category not in estimated:
            raise SpecdecError(f"{config.label}: the estimate has no category {r.category!r}")
        e = estimated[r.category]
        context = r.prompt_tokens + r.tokens / 2
        p0, p1, s = (0.0, 0.0, 0.0) if config.draft_model is None else costs.draft_parts(config.draft_model, context)
        k = np.arange(e.proposed.size)
        verify = float(e.proposed @ np.array([costs.t(1 + x, context) for x in k]))
        drafted = float(e.proposed @ k)
        drafting = p0 + p1 * drafted + s * (drafted if e.looks is None else e.looks)
        per_token = (verify + drafting + (e.tokens - 1) * costs.accept_seconds) / e.tokens
        n = max(r.tokens - 1, 1)
        base += n * costs.t(1, context)
        spec += n * per_token
    return base / spec
