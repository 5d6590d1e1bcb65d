"""Prediction (b): a configuration's speedup in llama-server from specdec's estimator alone — the
reference decoder's teacher-forced passes on the same prompts (`specdec estimate --json`, its
"replay": tokens per iteration and the law of the proposal length at each gamma, exact at T = 0)
— priced at the engine's own costs (`costs.py`). Nothing from the engine's speculative runs.

Per request of the configuration (its category's estimate, its context L), with E tokens per
iteration and P(k) the share of iterations that draft k tokens, as the replay gives them at the
configuration's gamma:

    seconds per token = (sum_k P(k) [t(1 + k, L) + [k > 0] (k + 1) t_d(1, L)] + (E - 1) c_acc) / E,

t_d the draft model's own step (0 without one; `validation.py` prices it the same way), and the
speedup = sum over requests of (n - 1) t(1, L) / sum of (n - 1) seconds per token. Synthetic
acceptance (`--spec-synth-rates P_1..P_gamma`, unconditional rates) is known exactly: there
E = 1 + sum_k P(k) sum_{i <= k} P_i, with P(k) from the estimate of the drafter that proposes
(for `ngram-simple --spec-ngram-simple-size-n 1`: prompt lookup on the last token, `lookup:1`).

Which estimate matches which engine drafter: the draft model's GGUF and its HF folder
(`model:DIR`: the same weights, before llama.cpp's quantization); ngram-simple with a lookup
of n tokens and specdec's `lookup:N` only for N = 1 (specdec's lookup falls back to shorter
n-grams, llama.cpp's never does: for N > 1 the rules differ). ngram-mod has no specdec equivalent.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from specdec.engines.llamacpp.validation import Config, EngineCosts, Record
from specdec.errors import SpecdecError


def flag_value(config: Config, *names: str) -> str | None:
    for name in names:
        if name in config.flags[:-1]:
            return config.flags[config.flags.index(name) + 1]
    return None


def gamma_of(config: Config) -> int:
    """The longest draft the configuration makes (what the replay is read at)."""
    rates = flag_value(config, "--spec-synth-rates")
    if rates is not None:
        return len(rates.split(","))
    value = (flag_value(config, "--spec-ngram-simple-size-m") if config.spec_type == "ngram-simple" else
             flag_value(config, "--spec-draft-n-max", "--draft-max", "--draft"))
    if value is None:
        raise SpecdecError(f"{config.label}: no draft length in its flags for prediction (b)")
    return int(value)


def synthetic_rates(config: Config) -> list[float] | None:
    rates = flag_value(config, "--spec-synth-rates")
    return None if rates is None else [float(x) for x in rates.split(",")]


def category_replays(estimate: dict, gamma: int, path: Path) -> dict[str, dict]:
    """{category: the replay at gamma} of a `specdec estimate --json` output (one category or several)."""
    reports = estimate["categories"] if "categories" in estimate else {estimate.get("category", ""): estimate}
    out = {}
    for category, report in reports.items():
        replay = (report.get("replay") or {}).get(str(gamma))
        if replay is None or "proposed" not in replay:
            raise SpecdecError(f"{path}: no replay at gamma {gamma} with the proposal law for {category!r} "
                               "(`specdec estimate --max-k` above gamma, this version)")
        out[category] = replay
    return out


def iteration(replay: dict, rates: list[float] | None) -> tuple[np.ndarray, float]:
    """(P(k) for k = 0..gamma, E tokens per iteration)."""
    proposed = np.asarray(replay["proposed"], dtype=float)
    proposed = proposed / proposed.sum()
    if rates is None:
        return proposed, float(replay["tokens_per_iteration"])
    reach = np.concatenate([[0.0], np.cumsum(rates)])  # expected accepted drafts of a k-draft, k = 0..gamma
    return proposed, 1.0 + float(proposed @ reach[:proposed.size])


def predicted_b(config: Config, records: Sequence[Record], replays: dict[str, dict], costs: EngineCosts) -> float:
    """Prediction (b) of one configuration over its requests (module doc)."""
    rates = synthetic_rates(config)
    base = spec = 0.0
    for r in records:
        if r.category not in replays:
            raise SpecdecError(f"{config.label}: the estimate has no category {r.category!r}")
        p_k, tokens = iteration(replays[r.category], rates)
        context = r.prompt_tokens + r.tokens / 2
        t_d = 0.0 if config.draft_model is None else costs.t_draft(config.draft_model, context)
        k = np.arange(p_k.size)
        per_iteration = float(p_k @ (np.array([costs.t(1 + x, context) for x in k]) + np.where(k > 0, k + 1, 0) * t_d))
        per_token = (per_iteration + (tokens - 1) * costs.accept_seconds) / tokens
        n = max(r.tokens - 1, 1)
        base += n * costs.t(1, context)
        spec += n * per_token
    return base / spec
