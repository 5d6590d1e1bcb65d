"""vLLM's speculative-decoding metrics, read into counts (sources quoted in docs/engines.md).

- V1 Prometheus text: counters vllm:spec_decode_num_drafts, _num_draft_tokens,
  _num_accepted_tokens and _num_accepted_tokens_per_pos{position="i"} (drafts whose first
  i + 1 tokens were accepted), with or without the client library's `_total` suffix; label
  sets other than `position` (engines, models) are summed.
- V1 log lines "SpecDecoding metrics: ..., Accepted: N tokens, Drafted: N tokens,
  Per-position acceptance rate: r1, r2, ..." in either field order (each line counts one
  logging interval: lines are summed; r_i = accepted at position i / drafts of the interval).
- V0 log lines "Speculative metrics: ... Number of speculative tokens: k, ... Number of emitted
  tokens: N." (running totals: the last line counts).
- Per-request statistics (a response's "speculative_decoding" or "speculative_decoding_stats"
  block, one JSON document or JSON lines): acceptance histograms, summed; in detailed mode the
  per-step accepted/drafted lists.
"""
from __future__ import annotations

import re

import numpy as np

from specdec.engines.counts import (NUMBER, RATES, EngineCounts, as_count, as_length, dicts_with, line_field,
                                    prometheus_counters)
from specdec.errors import SpecdecError
from specdec.simulator.counts import accepted_and_reached, conditional_from_cumulative

V1_LINE = re.compile(r"SpecDecoding metrics:(?P<body>.*)")
V0_LINE = re.compile(r"Speculative metrics:(?P<body>.*)")


def parse_prometheus(text: str) -> EngineCounts:
    """vLLM's /metrics text: the four spec_decode counters, summed over label sets."""
    totals, per_pos = prometheus_counters(text, "vllm:spec_decode_num_", "vllm:spec_decode_num_accepted_tokens_per_pos")
    if "vllm:spec_decode_num_drafts" not in totals:
        raise SpecdecError("no vllm:spec_decode_num_drafts counter: not a vLLM /metrics page with speculative decoding")
    if not per_pos:
        return _aggregate_prometheus(totals)
    k = max(per_pos) + 1
    drafts = as_count(totals["vllm:spec_decode_num_drafts"], "vllm:spec_decode_num_drafts")
    accepted, reached = conditional_from_cumulative(drafts, [as_count(per_pos[i], f"position {i}") for i in range(k)])
    return EngineCounts("vllm-prometheus", accepted.tolist(), reached.tolist(), drafts,
                        _int(totals.get("vllm:spec_decode_num_draft_tokens")),
                        _int(totals.get("vllm:spec_decode_num_accepted_tokens")), k)


def _aggregate_prometheus(totals: dict[str, float]) -> EngineCounts:
    """A page without per-position counters (vLLM before they were added): accepted of drafted
    tokens only, for the i.i.d. model; k = draft tokens / drafts when that is whole."""
    drafts = _int(totals["vllm:spec_decode_num_drafts"])
    draft_tokens = _int(totals.get("vllm:spec_decode_num_draft_tokens"))
    accepted = _int(totals.get("vllm:spec_decode_num_accepted_tokens"))
    if draft_tokens is None or accepted is None:
        raise SpecdecError("no vllm:spec_decode_num_accepted_tokens_per_pos counters, and no num_draft_tokens / "
                           "num_accepted_tokens counters to fall back on")
    k = draft_tokens // drafts if drafts and draft_tokens % drafts == 0 else None
    if k is not None:
        as_length(k, "num_draft_tokens / num_drafts")
    return EngineCounts("vllm-prometheus", drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted, k=k,
                        note="no per-position counters on the page (an older vLLM): alpha is the i.i.d. model's, "
                             "from the token totals")


def _int(x: float | None) -> int | None:
    return None if x is None else as_count(x, "a spec_decode counter")


def parse_vllm_v1_log(lines: list[str]) -> EngineCounts:
    """Sum of the intervals' "SpecDecoding metrics" lines. With per-position rates (r_i = drafts
    of the interval whose first i + 1 tokens were accepted / drafts): drafts = drafted / k, k the
    number of rates (every draft k tokens long), accepted at position i = r_i * drafts. Older
    lines without rates give the aggregate only."""
    drafts_total, accepted_total, drafted_total = 0.0, 0, 0
    at_least: np.ndarray | None = None
    lines_seen = with_rates = 0
    for line in lines:
        m = V1_LINE.search(line)
        if m is None:
            continue
        lines_seen += 1
        body = m.group("body")
        accepted = as_count(line_field(body, "Accepted", "vLLM SpecDecoding metrics"), "Accepted")
        drafted = as_count(line_field(body, "Drafted", "vLLM SpecDecoding metrics"), "Drafted")
        accepted_total += accepted
        drafted_total += drafted
        rates_m = re.search(r"Per-position acceptance rate:\s*(" + RATES + ")", body)
        if rates_m is None or drafted == 0:
            continue
        with_rates += 1
        rates = np.array([float(x) for x in re.findall(NUMBER, rates_m.group(1))])
        as_length(rates.size, "the number of per-position acceptance rates")
        if not np.all((rates >= 0) & (rates <= 1)):
            raise SpecdecError(f"per-position acceptance rates must lie in [0, 1]: {rates_m.group(1).strip()[:80]}")
        drafts = drafted / rates.size
        at_least = rates * drafts if at_least is None else _add(at_least, rates * drafts)
        drafts_total += drafts
    if not lines_seen:
        raise SpecdecError("no 'SpecDecoding metrics' line: not a vLLM V1 log with speculative decoding")
    if at_least is None:
        return EngineCounts("vllm-log", draft_tokens=drafted_total, accepted_tokens=accepted_total)
    if with_rates < lines_seen:
        raise SpecdecError(f"{lines_seen - with_rates} of {lines_seen} SpecDecoding metrics lines lack per-position "
                           "rates: mixed log formats")
    drafts = as_count(round(drafts_total), "drafts")  # drafted / k per line: whole unless drafts were short
    acc, reached = conditional_from_cumulative(drafts, np.minimum(np.rint(at_least).astype(np.int64), drafts))
    return EngineCounts("vllm-log", acc.tolist(), reached.tolist(), drafts, drafted_total, accepted_total, at_least.size)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size != b.size:
        raise SpecdecError(f"SpecDecoding metrics lines disagree on the draft length: {a.size} vs {b.size} positions")
    return a + b


def parse_vllm_v0_log(lines: list[str]) -> EngineCounts:
    """The last "Speculative metrics" line (V0 prints running totals). V0's accepted tokens
    include tokens accepted after an earlier rejection, so the prefix-accepted count is taken
    from the emitted tokens instead: emitted = accepted prefix + one token per draft."""
    found = [m.group("body") for line in lines if (m := V0_LINE.search(line))]
    if not found:
        raise SpecdecError("no 'Speculative metrics' line: not a vLLM V0 log with speculative decoding")
    body = found[-1]
    what = "vLLM Speculative metrics"
    k = as_length(line_field(body, "Number of speculative tokens", what), "Number of speculative tokens")
    draft = as_count(line_field(body, "Number of draft tokens", what), "Number of draft tokens")
    emitted_m = re.search(r"Number of emitted tokens(?: tokens)?:\s*(\d+)", body)
    if emitted_m is None:
        raise SpecdecError(f"{what} line lacks 'Number of emitted tokens': {body.strip()[:120]}")
    if draft % k:
        raise SpecdecError(f"{what}: {draft} draft tokens are not a multiple of k = {k}")
    drafts, emitted = draft // k, as_count(emitted_m.group(1), "Number of emitted tokens")
    if not drafts <= emitted <= drafts * (k + 1):
        raise SpecdecError(f"{what}: {emitted} emitted tokens impossible for {drafts} drafts of {k}")
    return EngineCounts("vllm-log-v0", drafts=drafts, draft_tokens=draft, accepted_tokens=emitted - drafts, k=k,
                        emitted_tokens=emitted)


def parse_json(objects: list) -> EngineCounts | None:
    """Per-request statistics (`--per-request-spec-decode-metrics summary|detailed`): every
    "speculative_decoding" block in the objects, summed; None when there is none. A step that
    drafted d tokens and accepted a reaches positions 1..min(a + 1, d): from the detailed
    per-step lists exactly, from histograms by draft length exactly, from the plain histogram
    (index j: steps that accepted exactly j drafts) with every draft taken as k long, which
    `note` flags when num_draft_tokens shows shorter drafts."""
    blocks = [d["speculative_decoding"] for obj in objects for d in dicts_with(obj, "speculative_decoding")]
    if not blocks:
        return None
    by_length: dict[int, np.ndarray] = {}
    short = False
    for b in blocks:
        if b is None:  # vLLM sends null for requests with n > 1
            continue
        if not isinstance(b, dict):
            raise SpecdecError("a speculative_decoding block must be a JSON object")
        for length, h in _histograms(b).items():
            by_length[length] = by_length.get(length, 0) + h
        short |= _shorter_than_k(b)
    if not by_length:
        raise SpecdecError("every speculative_decoding block is null (vLLM reports them only for requests with n = 1)")
    k = max(by_length)
    accepted, reached = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    for length, h in by_length.items():  # positions past a draft's length are not reached by it
        acc, rea = accepted_and_reached(h)
        accepted[:length] += acc
        reached[:length] += rea
    drafts = int(sum(h.sum() for h in by_length.values()))
    note = ("num_draft_tokens shows drafts shorter than num_spec_tokens: positions past a short draft count as "
            "rejected (biased low); --per-request-spec-decode-metrics detailed gives them exactly") if short else None
    return EngineCounts("vllm-request", accepted.tolist(), reached.tolist(), drafts,
                        int(sum(h.sum() * n for n, h in by_length.items())), int(accepted.sum()), k, note=note)


def _histograms(b: dict) -> dict[int, np.ndarray]:
    """{draft length: histogram of accepted counts} of one block, checked against its totals."""
    steps_a, steps_d = b.get("per_step_accepted"), b.get("per_step_drafted")
    if steps_a is not None or steps_d is not None:  # detailed: one entry per verify step
        if not (isinstance(steps_a, list) and isinstance(steps_d, list) and len(steps_a) == len(steps_d)):
            raise SpecdecError("per_step_accepted and per_step_drafted must be lists of equal length")
        hists: dict[int, np.ndarray] = {}
        for a, d in zip(steps_a, steps_d):
            a, d = as_count(a, "per_step_accepted"), as_length(d, "per_step_drafted")
            if a > d:
                raise SpecdecError(f"a step accepted {a} of {d} drafted tokens")
            hists.setdefault(d, np.zeros(d + 1, dtype=np.int64))[a] += 1
    else:
        single = b.get("acceptance_histogram")
        raw = b.get("acceptance_histogram_by_draft_length") or (
            {len(single) - 1: single} if isinstance(single, list) and single else None)
        if not isinstance(raw, dict) or not raw:
            raise SpecdecError("a speculative_decoding block lacks acceptance_histogram (a list of counts)")
        hists = {}
        for key, hist in raw.items():
            length = as_length(key, "a draft length")
            if not isinstance(hist, list) or len(hist) != length + 1:
                raise SpecdecError(f"acceptance histogram for draft length {length} must be a list of {length + 1} counts")
            hists[length] = hists.get(length, 0) + np.array([as_count(x, "an acceptance histogram count") for x in hist],
                                                            dtype=np.int64)
    steps = sum(int(h.sum()) for h in hists.values())
    accepted = sum(int((np.arange(n + 1) * h).sum()) for n, h in hists.items())
    for key, value in (("num_spec_steps", steps), ("num_accepted_draft_tokens", accepted)):
        if key in b and as_count(b[key], key) != value:
            raise SpecdecError(f"speculative_decoding block: {key} = {b[key]} but its histogram gives {value}")
    if "num_spec_tokens" in b and max(hists) > as_length(b["num_spec_tokens"], "num_spec_tokens"):
        raise SpecdecError(f"speculative_decoding block: a draft of {max(hists)} tokens exceeds num_spec_tokens = "
                           f"{b['num_spec_tokens']}")
    return hists


def _shorter_than_k(b: dict) -> bool:
    """Whether a plain histogram's block drafted fewer tokens than steps x k (short drafts)."""
    hist = b.get("acceptance_histogram")
    if "per_step_drafted" in b or "acceptance_histogram_by_draft_length" in b or not isinstance(hist, list):
        return False
    drafted = b.get("num_draft_tokens")
    return drafted is not None and as_count(drafted, "num_draft_tokens") < sum(hist) * (len(hist) - 1)


def parse_text(text: str) -> EngineCounts | None:
    """vLLM's /metrics page or its V1 / V0 log, or None when the text is none of them."""
    if "vllm:spec_decode_num_" in text:
        return parse_prometheus(text)
    lines = text.splitlines()
    if any(V1_LINE.search(line) for line in lines):
        return parse_vllm_v1_log(lines)
    if any(V0_LINE.search(line) for line in lines):
        return parse_vllm_v0_log(lines)
    return None
