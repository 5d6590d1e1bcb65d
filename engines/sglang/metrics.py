"""SGLang's speculative-decoding metrics, read into counts (sources quoted in docs/engines.md).

- Per-request `meta_info` (the native /generate response, `choices[i].meta_info` with
  `return_meta_info`, or `sglext.spec_tokens_details`): `spec_verify_ct` (verify steps),
  `spec_num_correct_drafts` (accepted draft tokens, the bonus token excluded; older name
  `spec_accepted_drafts`), `spec_num_proposed_drafts` (verify steps x (num_draft_tokens - 1),
  from the configuration; older `spec_proposed_drafts`) and, where sent,
  `spec_correct_drafts_histogram` (older `spec_accept_histogram`: index j = verify steps that
  accepted exactly j drafts; ragged, as long as the largest j seen). Summed over requests.
  With histograms the counts are per position (with `--speculative-eagle-topk 1`, a chain;
  with topk > 1 position i is the depth along the accepted path and num_draft_tokens - 1
  counts tree nodes); without, accepted of proposed draft tokens only.
- Prometheus gauges `sglang:spec_accept_length` (accepted drafts + the bonus token per
  verify step) and `sglang:spec_num_steps`: set once per log interval (`decode_log_interval`
  decode steps) to the interval's mean, so they are averages without counts.
- Scheduler log lines "Decode batch, ... accept len: L, accept rate: R, ...": one interval
  each, also averages. Their `accept rate` changed definition in 2026 (PR #23530: correct
  drafts / (steps x (num_draft_tokens - 1)); before, (correct drafts + bonus) / (steps x
  num_draft_tokens)), so only `accept len` is read, and the draft length must be given.
"""
from __future__ import annotations

import re

import numpy as np

from specdec.engines.counts import NUMBER, EngineCounts, as_count, as_length, dicts_with, prometheus_samples
from specdec.errors import SpecdecError
from specdec.simulator.counts import accepted_and_reached

DECODE_LINE = re.compile(r"Decode batch[,.].*?accept len:\s*(" + NUMBER + ")")
AVERAGES = ("SGLang reports means over its log intervals, not counts: alpha has no interval, and the intervals "
            "are weighted equally")


def _first(d: dict, *keys: str):
    return next((d[k] for k in keys if k in d), None)


def parse_json(objects: list) -> EngineCounts | None:
    """Per-request meta_info counts of every object holding `spec_verify_ct`, or None."""
    requests = [d for obj in objects for d in dicts_with(obj, "spec_verify_ct")]
    if not requests:
        return None
    verify = correct = proposed = 0
    hists: list[tuple[np.ndarray, int | None]] = []
    k_seen: set[int] = set()
    for d in requests:
        v = as_count(d["spec_verify_ct"], "spec_verify_ct")
        c = _first(d, "spec_num_correct_drafts", "spec_accepted_drafts")
        p = _first(d, "spec_num_proposed_drafts", "spec_proposed_drafts")
        if v == 0:
            continue
        if c is None or p is None:
            raise SpecdecError("SGLang meta_info has spec_verify_ct but lacks spec_num_correct_drafts / "
                               "spec_num_proposed_drafts (or spec_accepted_drafts / spec_proposed_drafts)")
        c, p = as_count(c, "spec_num_correct_drafts"), as_count(p, "spec_num_proposed_drafts")
        if c > p or p % v:
            raise SpecdecError(f"SGLang meta_info: {c} correct of {p} proposed drafts in {v} verify steps is impossible")
        k = as_length(p // v, "spec_num_proposed_drafts / spec_verify_ct") if p else None
        k_seen.add(k or 0)
        verify, correct, proposed = verify + v, correct + c, proposed + p
        hist = _first(d, "spec_correct_drafts_histogram", "spec_accept_histogram")
        hists.append((_checked_histogram(hist, v, c, k), k) if hist is not None else (None, k))
    if verify == 0:
        raise SpecdecError("SGLang meta_info: no verify step was made (spec_verify_ct is 0 everywhere)")
    note = None if len(k_seen) == 1 else (f"requests drafted {sorted(k_seen)} tokens per step (adaptive steps): "
                                          "the longest is taken as k")
    k = max(k_seen) or None
    if not all(h is not None for h, _ in hists):
        return EngineCounts("sglang-request", drafts=verify, draft_tokens=proposed, accepted_tokens=correct, k=k,
                            note=note)
    top = max(k or 0, max(h.size - 1 for h, _ in hists))
    accepted, reached = np.zeros(top, dtype=np.int64), np.zeros(top, dtype=np.int64)
    for h, k_req in hists:  # zero-padded to the request's draft length: drafts are k_req long
        length = k_req or h.size - 1
        padded = np.zeros(length + 1, dtype=np.int64)
        padded[:h.size] = h
        acc, rea = accepted_and_reached(padded)
        accepted[:length] += acc
        reached[:length] += rea
    return EngineCounts("sglang-request", accepted.tolist(), reached.tolist(), verify, proposed, correct, k or top,
                        note=note)


def _checked_histogram(hist, verify: int, correct: int, k: int | None) -> np.ndarray:
    if not isinstance(hist, list) or not hist:
        raise SpecdecError("spec_correct_drafts_histogram must be a non-empty list of counts")
    as_length(max(len(hist) - 1, 1), "the acceptance histogram's length")
    h = np.array([as_count(x, "a spec_correct_drafts_histogram count") for x in hist], dtype=np.int64)
    if int(h.sum()) != verify or int((np.arange(h.size) * h).sum()) != correct:
        raise SpecdecError(f"spec_correct_drafts_histogram {hist[:12]} disagrees with spec_verify_ct = {verify} and "
                           f"{correct} correct drafts")
    if k is not None and np.any(h[k + 1:]):
        raise SpecdecError(f"spec_correct_drafts_histogram counts steps accepting more than the {k} drafts proposed")
    return h


def parse_text(text: str) -> EngineCounts | None:
    """SGLang's /metrics page or its scheduler log, or None when the text is neither."""
    if "sglang:spec_accept_length" in text:
        return _parse_prometheus(text)
    lengths = [m.group(1) for line in text.splitlines() if (m := DECODE_LINE.search(line))]
    if not lengths:
        if "Decode batch" in text and "accept len" not in text:
            raise SpecdecError("SGLang 'Decode batch' lines without 'accept len': speculative decoding was off")
        return None
    means = [_accept_length(x, "accept len") - 1.0 for x in lengths]
    return EngineCounts("sglang-log", mean_accepted=float(np.mean(means)), windows=len(means),
                        note=AVERAGES + "; the log does not state the draft length (give --draft-length: "
                                        "--speculative-num-steps for chains)")


def _parse_prometheus(text: str) -> EngineCounts:
    """The spec_accept_length gauge (mean over label sets) and, when present, spec_num_steps as k."""
    values: dict[str, list[str]] = {}
    for name, _, raw in prometheus_samples(text, "sglang:spec_"):
        values.setdefault(name, []).append(raw)
    lengths = [_accept_length(x, "sglang:spec_accept_length") for x in values.get("sglang:spec_accept_length", [])]
    if not lengths:
        raise SpecdecError("no sglang:spec_accept_length sample in the metrics")
    steps = {as_length(x, "sglang:spec_num_steps") for x in values.get("sglang:spec_num_steps", [])}
    tokens = {as_length(x, "sglang:spec_num_draft_tokens") for x in values.get("sglang:spec_num_draft_tokens", [])}
    if len(steps) > 1:
        raise SpecdecError(f"sglang:spec_num_steps differs between label sets: {sorted(steps)}")
    k = steps.pop() if steps else None
    note = AVERAGES + " (the last interval only)"
    if k is not None and tokens and max(tokens) != k + 1:
        note += (f"; num_draft_tokens {max(tokens)} != num_steps + 1: a draft tree (topk > 1), whose accept length "
                 "the chain model below does not describe")
    return EngineCounts("sglang-prometheus", k=k, mean_accepted=float(np.mean(lengths)) - 1.0, windows=1, note=note)


def _accept_length(raw: str, what: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SpecdecError(f"{what} must be a number, got {raw[:40]!r}") from None
    if not 1.0 <= value <= 1025.0:
        raise SpecdecError(f"{what} must lie in [1, 1025] (accepted drafts + the bonus token), got {raw[:40]}")
    return value
