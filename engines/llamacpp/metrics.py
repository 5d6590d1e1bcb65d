"""llama.cpp's speculative-decoding output, read into counts (sources quoted in docs/engines.md).

- llama-server's per-request line "draft acceptance = r ( a accepted / g generated)" (older
  builds: "draft acceptance rate = ..."), since mid-2026 followed by "mean acceptance length =
  L, acceptance rate per position = (r1, r2, ...)": r_i = verify steps whose first i tokens were
  accepted / verify steps. Requests are summed; with the per-position rates on every line the
  counts are per position (verify steps = a / sum(r_i)).
- The speculative implementations' "statistics <impl>: #calls(b,g,a) = ..., #gen drafts = N,
  #acc drafts = N, #gen tokens = N, #acc tokens = N[, #mean acc len = L, #acc rate/pos = (...)]"
  lines: running totals per implementation, so the last line of each counts; used when there
  is no per-request line.
- `llama-speculative`'s summary: n_draft (k), n_drafted, n_accept.
- llama-server's JSON `timings.draft_n` / `timings.draft_n_accepted` (absent when nothing was
  drafted), summed over responses.
Only the summary states the draft length: the others need it given (`--spec-draft-n-max`).
"""
from __future__ import annotations

import re

import numpy as np

from specdec.engines.counts import NUMBER, RATES, EngineCounts, as_count, as_length, as_rate, dicts_with
from specdec.errors import SpecdecError
from specdec.simulator.counts import conditional_from_cumulative

SERVER = re.compile(r"draft acceptance(?: rate)? = \s*(" + NUMBER + r")\s*\(\s*(\d+) accepted /\s*(\d+) generated\)"
                    r"(?:.*?acceptance rate per position = \((" + RATES + r")\))?")
STATISTICS = re.compile(r"statistics\s+(\S+):.*?#gen drafts = *(\d+), #acc drafts = *(\d+), #gen tokens = *(\d+), "
                        r"#acc tokens = *(\d+)(?:.*?#acc rate/pos = \((" + RATES + r")\))?")
SUMMARY = re.compile(r"^(?:.*\]\s*|\s*)(n_draft|n_predict|n_drafted|n_accept|accept)\s*=\s*(" + NUMBER + r")%?\s*$")


def parse_text(text: str) -> EngineCounts | None:
    """llama.cpp's server lines, statistics lines or llama-speculative summary, or None."""
    lines = text.splitlines()
    server = [m for line in lines if (m := SERVER.search(line))]
    if server:
        return _from_lines("llamacpp-server", [(m.group(2), m.group(3), None, m.group(4)) for m in server])
    last: dict[str, re.Match] = {}
    for line in lines:
        if m := STATISTICS.search(line):
            last[m.group(1)] = m
    if last:
        if len(last) > 1:
            raise SpecdecError(f"statistics of several speculative implementations ({', '.join(sorted(last))}): "
                               "give the log of one")
        m = next(iter(last.values()))
        return _from_lines(f"llamacpp-statistics ({m.group(1)})", [(m.group(5), m.group(4), m.group(2), m.group(6))])
    if re.search(r"^\s*n_(draft|drafted|accept)\s*=", text, re.M):
        return _parse_summary(lines)
    return None


def _from_lines(source: str, rows: list[tuple]) -> EngineCounts:
    """Sum of (accepted, generated, verify steps or None, per-position rates or None) rows."""
    accepted = sum(as_count(a, "accepted draft tokens") for a, _, _, _ in rows)
    generated = sum(as_count(g, "generated draft tokens") for _, g, _, _ in rows)
    if accepted > generated:
        raise SpecdecError(f"llama.cpp: {accepted} accepted of {generated} generated draft tokens is impossible")
    if any(rates is None for _, _, _, rates in rows):
        return EngineCounts(source, draft_tokens=generated, accepted_tokens=accepted)
    at_least: np.ndarray | None = None
    steps_total = 0
    for a, _, steps, rates in rows:
        r = np.array([as_rate(x, "an acceptance rate per position") for x in rates.split(",")])
        as_length(r.size, "the number of acceptance rates per position")
        a = as_count(a, "accepted draft tokens")
        steps = as_count(steps, "#gen drafts") if steps is not None else (round(a / r.sum()) if r.sum() > 0 else None)
        if steps is None:  # nothing accepted: the steps are not recoverable from the rates
            raise SpecdecError("a llama.cpp line with every per-position rate 0 does not say how many drafts it made")
        if at_least is not None and at_least.size != r.size:
            raise SpecdecError(f"llama.cpp lines disagree on the draft length: {at_least.size} vs {r.size} positions")
        counts = np.minimum(np.rint(r * steps).astype(np.int64), steps)
        at_least = counts if at_least is None else at_least + counts
        steps_total += steps
    acc, reached = conditional_from_cumulative(steps_total, at_least)
    return EngineCounts(source, acc.tolist(), reached.tolist(), steps_total, generated, accepted, at_least.size,
                        note="per-position counts from rates printed to 3 decimals (rounded to whole drafts)")


def _parse_summary(lines: list[str]) -> EngineCounts:
    summary: dict[str, str] = {}
    for line in lines:
        m = SUMMARY.match(line.rstrip())
        if m:
            summary[m.group(1)] = m.group(2)
    missing = [key for key in ("n_draft", "n_drafted", "n_accept") if key not in summary]
    if missing:
        raise SpecdecError("llama.cpp output lacks " + ", ".join(missing) + " (expected llama-speculative's summary, "
                           "llama-server's 'draft acceptance' lines or 'statistics' lines)")
    return EngineCounts("llamacpp-speculative", draft_tokens=as_count(summary["n_drafted"], "n_drafted"),
                        accepted_tokens=as_count(summary["n_accept"], "n_accept"),
                        k=as_length(summary["n_draft"], "n_draft"))


def parse_json(objects: list) -> EngineCounts | None:
    """llama-server responses' `timings` with draft counts, summed; None when there are none."""
    timings = [d for obj in objects for d in dicts_with(obj, "draft_n")]
    if not timings:
        return None
    return _from_lines("llamacpp-server-json", [(d.get("draft_n_accepted", "missing"), d["draft_n"], None, None)
                                                for d in timings])
