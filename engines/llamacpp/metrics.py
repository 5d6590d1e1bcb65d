"""llama.cpp's speculative-decoding output, read into counts (sources quoted in docs/engines.md;
real captures in tests/fixtures/llamacpp/).

- llama-server's /metrics page (`--metrics`): counters `llamacpp:spec_decode_num_drafts_total`
  (verify steps), `_num_draft_tokens_total`, `_num_accepted_tokens_total` and
  `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}` (verify steps that
  accepted at least i + 1 drafts; as many positions as the implementation's longest draft).
  Per position; the mean draft length is draft tokens / drafts. With `llamacpp:tokens_predicted_total`
  (n tokens) the target's steps are n - accepted (a request's first token comes from its prompt's
  pass, so this counts one step a request too many): the share of steps that drafted.
- llama-server's per-request line "draft acceptance = r ( a accepted / g generated), mean len =
  L" (L = 1 + a / verify steps; older builds: "draft acceptance rate = ..." without L; mid-2026
  builds: "mean acceptance length = L, acceptance rate per position = (r1, r2, ...)"), and at
  trace verbosity the next line "acc per pos = (r1, ...)": r_i = verify steps whose first i
  tokens were accepted / verify steps. Requests are summed; with the rates on every line the
  counts are per position (verify steps = a / sum(r_i)); with L on every line the verify steps
  are a / (L - 1) and the draft length is the engine's mean, g / steps.
- The speculative implementations' "statistics <impl>: #calls(b,g,a) = ..., #gen drafts = N,
  #acc drafts = N, #gen tokens = N, #acc tokens = N[, #mean acc len = L, #acc rate/pos = (...)]"
  lines (trace verbosity in current builds): running totals per implementation, so the last
  line of each counts; used when there is no per-request line, and beside per-request lines
  that state no draft count (older builds: no 'mean len') for the draft length alone
  (#gen tokens / #gen drafts, rounded), the per-request totals kept.
- `llama-speculative`'s summary: n_draft (k), n_drafted, n_accept.
- llama-server's JSON `timings.draft_n` / `timings.draft_n_accepted` (absent when nothing was
  drafted: such a response counts as zero drafts), summed over responses. They count no
  drafts, so the draft length must be given (`--draft-length`).
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from specdec.engines.counts import (NUMBER, RATES, EngineCounts, as_count, as_length, as_rate, dicts_with,
                                    prometheus_counters)
from specdec.errors import SpecdecError
from specdec.simulator.counts import conditional_from_cumulative

SERVER = re.compile(r"draft acceptance(?: rate)? = \s*(" + NUMBER + r")\s*\(\s*(\d+) accepted /\s*(\d+) generated\)"
                    r"(?:, mean (?:acceptance length|len) = \s*(" + NUMBER + r"))?"
                    r"(?:.*?acceptance rate per position = \((" + RATES + r")\))?")
PER_POS_LINE = re.compile(r"acc per pos = \((" + RATES + r")\)")
STATISTICS = re.compile(r"statistics\s+(\S+):.*?#gen drafts = *(\d+), #acc drafts = *(\d+), #gen tokens = *(\d+), "
                        r"#acc tokens = *(\d+)(?:.*?#acc rate/pos = \((" + RATES + r")\))?")
SUMMARY = re.compile(r"^(?:.*\]\s*|\s*)(n_draft|n_predict|n_drafted|n_accept|accept)\s*=\s*(" + NUMBER + r")%?\s*$")
PROMETHEUS = "llamacpp:spec_decode_"
PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos"
PREDICTED = "llamacpp:tokens_predicted_total"
SHORT_DRAFTS = ("its drafts vary in length (at most {k}, {mean:.1f} on average): a draft that ends before position "
                "i with every token accepted counts as reaching i and not accepting it, so alpha_i past the shorter "
                "drafts is biased low")


def parse_text(text: str) -> EngineCounts | None:
    """llama-server's /metrics page or log lines, statistics lines or llama-speculative's
    summary, or None."""
    if PROMETHEUS in text:
        return _parse_prometheus(text)
    lines = text.splitlines()
    server = _server_rows(lines)
    statistics = _statistics(lines)
    if server:
        counts = _from_lines("llamacpp-server", server)
        if counts.k is None and statistics is not None:  # no 'mean len': the statistics line states the drafts
            return _length_from_statistics(counts, *statistics)
        return counts
    if statistics is not None:
        return _from_lines(*statistics)
    if re.search(r"^\s*n_(draft|drafted|accept)\s*=", text, re.M):
        return _parse_summary(lines)
    return None


def _statistics(lines: list[str]) -> tuple[str, tuple] | None:
    """(source, row) of the last 'statistics' line (the running totals of the one implementation
    the log names), its drafts as the verify steps, or None when there is none."""
    last: dict[str, re.Match] = {}
    for line in lines:
        if m := STATISTICS.search(line):
            last[m.group(1)] = m
    if not last:
        return None
    if len(last) > 1:
        raise SpecdecError(f"statistics of several speculative implementations ({', '.join(sorted(last))}): "
                           "give the log of one")
    m = next(iter(last.values()))
    return f"llamacpp-statistics ({m.group(1)})", [(m.group(5), m.group(4), as_count(m.group(2), "#gen drafts"),
                                                      m.group(6))]


def _length_from_statistics(counts: EngineCounts, source: str, rows: list[tuple]) -> EngineCounts:
    """The per-request totals `counts`, whose lines state no draft count, with the draft length
    the statistics line gives: its draft tokens / its drafts, rounded (the same engine's mean)."""
    _, generated, drafts, _ = rows[0]
    generated = as_count(generated, "#gen tokens")
    if drafts == 0 or generated == 0:
        return counts
    k = as_length(max(1, round(generated / drafts)), "the mean draft length")
    said = (f"k = {k}: the engine's mean draft length from its {source[len('llamacpp-'):]} line ({generated} draft "
            f"tokens / {drafts} drafts = {generated / drafts:.2f}; the per-request lines state no draft count); "
            "its drafts vary in length")
    return dataclasses.replace(counts, k=k, note=f"{counts.note}; {said}" if counts.note else said)


def _server_rows(lines: list[str]) -> list[tuple]:
    """(accepted, generated, verify steps or None, rates or None) of every 'draft acceptance'
    line; the steps from its mean len, its rates on the line or on the 'acc per pos' line after it."""
    rows: list[list] = []
    for line in lines:
        if m := SERVER.search(line):
            accepted, mean_len = as_count(m.group(2), "accepted draft tokens"), m.group(4)
            steps = None
            if mean_len is not None and float(mean_len) > 1.0:  # L = 1 + accepted / steps, printed to 2 decimals
                steps = max(1, round(accepted / (float(mean_len) - 1.0)))
            rows.append([m.group(2), m.group(3), steps, m.group(5)])
        elif (m := PER_POS_LINE.search(line)) and rows and rows[-1][3] is None:
            rows[-1][3] = m.group(1)
    return [tuple(row) for row in rows]


def _from_lines(source: str, rows: list[tuple]) -> EngineCounts:
    """Sum of (accepted, generated, verify steps or None, per-position rates or None) rows:
    per position when every row has rates; else the totals, with the engine's mean draft
    length as k when every row says how many drafts it made."""
    accepted = sum(as_count(a, "accepted draft tokens") for a, _, _, _ in rows)
    generated = sum(as_count(g, "generated draft tokens") for _, g, _, _ in rows)
    if accepted > generated:
        raise SpecdecError(f"llama.cpp: {accepted} accepted of {generated} generated draft tokens is impossible")
    if any(rates is None for _, _, _, rates in rows):
        if any(steps is None for _, _, steps, _ in rows) or generated == 0:
            return EngineCounts(source, draft_tokens=generated, accepted_tokens=accepted)
        return _mean_length(source, sum(steps for _, _, steps, _ in rows), generated, accepted)
    at_least: np.ndarray | None = None
    steps_total = 0
    for a, _, steps, rates in rows:
        r = np.array([as_rate(x, "an acceptance rate per position") for x in rates.split(",")])
        as_length(r.size, "the number of acceptance rates per position")
        a = as_count(a, "accepted draft tokens")
        if source.startswith("llamacpp-server"):  # the rates say more about the steps than the 2-decimal mean
            steps = round(a / r.sum()) if r.sum() > 0 else steps
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


def _mean_length(source: str, drafts: int, generated: int, accepted: int, note: str | None = None) -> EngineCounts:
    """Totals whose draft length is the engine's own mean, draft tokens / drafts, rounded."""
    if drafts == 0:
        raise SpecdecError(f"{source}: {generated} draft tokens in 0 drafts is impossible")
    mean = generated / drafts
    k = as_length(max(1, round(mean)), "the mean draft length")
    said = (f"k = {k}: the engine's mean draft length ({generated} draft tokens / {drafts} drafts = {mean:.2f}); "
            "its drafts vary in length")
    return EngineCounts(source, drafts=drafts, draft_tokens=generated, accepted_tokens=accepted, k=k,
                        note=said if note is None else f"{said}; {note}")


def _parse_prometheus(text: str) -> EngineCounts:
    """llama-server's /metrics page: per position when the per-position counters are there."""
    totals, per_pos = prometheus_counters(text, PROMETHEUS, PER_POS)
    name = PROMETHEUS + "num_"
    if name + "drafts" not in totals:
        raise SpecdecError(f"no {name}drafts counter: not a llama-server /metrics page (started with --metrics)")
    drafts = as_count(totals[name + "drafts"], name + "drafts")
    tokens = [totals.get(name + key) for key in ("draft_tokens", "accepted_tokens")]
    if tokens[0] is None or tokens[1] is None:
        raise SpecdecError(f"a llama-server /metrics page lacks {name}draft_tokens or {name}accepted_tokens")
    generated, accepted = as_count(tokens[0], name + "draft_tokens"), as_count(tokens[1], name + "accepted_tokens")
    if accepted > generated:
        raise SpecdecError(f"llama-server /metrics: {accepted} accepted of {generated} draft tokens is impossible")
    predicted = prometheus_counters(text, PREDICTED, PER_POS)[0].get(PREDICTED.removesuffix("_total"))
    predicted = None if predicted is None else as_count(predicted, PREDICTED)
    steps = None if predicted is None else predicted - accepted
    if steps is not None and steps < drafts:
        raise SpecdecError(f"llama-server /metrics: {predicted} tokens predicted cannot hold {drafts} drafts and "
                           f"{accepted} accepted tokens")
    if drafts == 0 or not per_pos:  # nothing verified yet, or a build without per-position counters
        if drafts == 0:
            return EngineCounts("llamacpp-prometheus", drafts=0, draft_tokens=generated, accepted_tokens=accepted,
                                steps=steps, note="the server has verified no draft yet (spec_decode_num_drafts 0)")
        return _mean_length("llamacpp-prometheus", drafts, generated, accepted,
                            "no per-position counters on the page (an older llama-server)")
    k = max(per_pos) + 1
    acc, reached = conditional_from_cumulative(drafts, [as_count(per_pos[i], f"position {i}") for i in range(k)])
    note = SHORT_DRAFTS.format(k=k, mean=generated / drafts) if generated < drafts * k else None
    return EngineCounts("llamacpp-prometheus", acc.tolist(), reached.tolist(), drafts, generated, accepted, k,
                        steps=steps, note=note)


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
    """llama-server responses' `timings`, summed (a response without draft_n drafted nothing: zero
    drafts); None when there are none."""
    found = {id(d): d for obj in objects for key in ("draft_n", "predicted_n") for d in dicts_with(obj, key)}
    timings = list(found.values())
    if not timings:
        return None
    drafted = [d for d in timings if "draft_n" in d]
    idle = len(timings) - len(drafted)
    none_drafted = (f"none of the {len(timings)} responses drafted a token (no draft_n in their timings: speculation "
                    "off, or the drafter found nothing to propose)")
    if not drafted:
        return EngineCounts("llamacpp-server-json", draft_tokens=0, accepted_tokens=0, note=none_drafted)
    counts = _from_lines("llamacpp-server-json", [(d.get("draft_n_accepted", "missing"), d["draft_n"], None, None)
                                                  for d in drafted])
    note = ("timings count draft tokens, not drafts: the draft length is not stated (its /metrics page or the "
            "log's 'mean len' give the engine's own)")
    if idle:
        note += f"; {idle} of the {len(timings)} responses drafted nothing (counted as zero drafts)"
    return EngineCounts(counts.source, draft_tokens=counts.draft_tokens, accepted_tokens=counts.accepted_tokens,
                        note=note)
