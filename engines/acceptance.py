"""Per-position acceptance alpha_1..alpha_K, with 95% intervals, from an engine's counts.

- Per-position counts (vLLM V1, specdec): alpha_i = accepted_i / reached_i, Wilson interval.
- Aggregate counts (vLLM V0, llama.cpp): only r = accepted / drafted tokens is known. Under
  the i.i.d. model of Leviathan et al. with every draft k tokens long, E(accepted per draft)
  = sum_{i<=k} alpha^i, so r = (alpha - alpha^(k+1)) / ((1 - alpha) k), solved for alpha
  (monotone, `specdec.simulator.counts.alpha_from_fraction`); r's Wilson interval maps to
  alpha's. Flagged as a model: engines that stop drafts early (llama.cpp's --draft-p-min) make
  drafts shorter than k and alpha biased low.
- Means without counts (SGLang's gauges and log lines: accepted drafts per verify step,
  averaged over log intervals): the same i.i.d. model, sum_{i<=k} alpha^i = the mean; no
  interval exists (None).
- A source's own note (what its format could not give) is appended to the model's statement.
- Beyond the K observed positions the simulator reuses alpha_K; the plan flags it.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from specdec.engines.counts import EngineCounts
from specdec.errors import SpecdecError
from specdec.simulator.counts import Acceptance, alpha_from_fraction, wilson_interval


def acceptance_from_counts(counts: EngineCounts, k: int | None = None) -> Acceptance:
    """alpha_i with intervals; k: the draft length for sources that do not state it (a k that
    contradicts the source's is an error)."""
    if k is not None and counts.k is not None and k != counts.k:
        raise SpecdecError(f"{counts.source} states draft length {counts.k}, not {k}: leave out --draft-length")
    acceptance = _acceptance(counts, counts.k or k)
    if counts.note:
        acceptance = replace(acceptance, model=f"{acceptance.model}; {counts.note}")
    return acceptance


def _acceptance(counts: EngineCounts, k: int | None) -> Acceptance:
    if counts.per_position:
        acc, reached = np.array(counts.accepted), np.array(counts.reached)
        if reached[0] == 0:
            raise SpecdecError(f"{counts.source}: no draft was made (0 drafts reached position 1)")
        keep = int(np.max(np.nonzero(reached > 0)[0])) + 1
        lo, hi = wilson_interval(acc[:keep], reached[:keep])
        return Acceptance(tuple((acc[:keep] / reached[:keep]).tolist()), tuple(zip(lo.tolist(), hi.tolist())),
                          "per-position counts", keep,
                          {"accepted": acc[:keep].tolist(), "reached": reached[:keep].tolist(), "drafts": counts.drafts})
    said = f" ({counts.note})" if counts.note else ""
    if counts.mean_accepted is None and not counts.draft_tokens:
        raise SpecdecError(f"{counts.source}: no drafted tokens counted{said}")
    if k is None:
        raise SpecdecError(f"{counts.source} does not state the draft length: give it (--draft-length K){said}")
    if counts.mean_accepted is not None:
        if counts.mean_accepted > k:
            raise SpecdecError(f"{counts.source}: {counts.mean_accepted:.2f} accepted drafts per verify step exceed the "
                               f"draft length {k}")
        alpha = alpha_from_fraction(counts.mean_accepted / k, k)
        return Acceptance((alpha,), (None,),
                          f"i.i.d. alpha from {counts.mean_accepted + 1:.2f} tokens per verify step (accepted drafts + "
                          f"the bonus token) averaged over {counts.windows} log interval(s), every draft assumed {k} "
                          "tokens long (Leviathan et al.'s model)", k,
                          {"mean_accepted_per_draft": counts.mean_accepted, "windows": counts.windows, "k": k})
    if counts.accepted_tokens is None or counts.accepted_tokens > counts.draft_tokens:
        raise SpecdecError(f"{counts.source}: accepted tokens missing or above drafted tokens")
    r = counts.accepted_tokens / counts.draft_tokens
    lo, hi = wilson_interval(counts.accepted_tokens, counts.draft_tokens)
    alpha = alpha_from_fraction(r, k)
    return Acceptance((alpha,), ((alpha_from_fraction(float(lo), k), alpha_from_fraction(float(hi), k)),),
                      f"i.i.d. alpha from {counts.accepted_tokens}/{counts.draft_tokens} accepted draft tokens, every "
                      f"draft assumed {k} tokens long (Leviathan et al.'s model; interval: Wilson on the tokens, which "
                      "are not independent: indicative)", k,
                      {"accepted_tokens": counts.accepted_tokens, "draft_tokens": counts.draft_tokens, "k": k})
