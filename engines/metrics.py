"""What serving engines report about speculative decoding, read into counts.

Formats (sources quoted in docs/engines.md):
- vLLM V1 Prometheus text: counters vllm:spec_decode_num_drafts, _num_draft_tokens,
  _num_accepted_tokens and _num_accepted_tokens_per_pos{position="i"} (drafts whose first
  i + 1 tokens were accepted), with or without the client library's `_total` suffix; label
  sets other than `position` (engines, models) are summed.
- vLLM V1 log lines "SpecDecoding metrics: Mean acceptance length: ..., Accepted: N tokens,
  Drafted: N tokens, Per-position acceptance rate: r1, r2, ..." (each line counts one logging
  interval: lines are summed; r_i = accepted at position i / drafts of the interval).
- vLLM V0 log lines "Speculative metrics: Draft acceptance rate: ..., System efficiency: ...,
  Number of speculative tokens: k, Number of accepted tokens: N, Number of draft tokens: N,
  Number of emitted tokens: N." (running totals: the last line counts).
- llama.cpp: `llama-speculative`'s summary (n_draft, n_drafted, n_accept) and llama-server's
  "draft acceptance rate = r ( a accepted / g generated)" lines (one per request: summed).
- vLLM per-request metrics (a response's "speculative_decoding" block, or JSON lines of
  responses): acceptance histograms, summed.
- specdec's own `decode --json` (stats.reached / stats.accepted per position).

Per-position sources give conditional counts (accepted_i of reached_i); aggregate sources
(V0, llama.cpp) give accepted of drafted tokens only, which `specdec.engines.acceptance` turns
into an i.i.d. alpha under a stated model. A source that cannot be read, or parses but lacks
what it needs, is a SpecdecError naming what is missing.
"""
from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specdec.errors import SpecdecError
from specdec.simulator.counts import accepted_and_reached, conditional_from_cumulative

FETCH_TIMEOUT_S = 10


def read_source(source: str, stdin_text: str | None = None) -> str:
    """The text of a file, '-' (standard input) or an http(s) URL (a Prometheus endpoint)."""
    if source == "-":
        return stdin_text or ""
    if source.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(source, timeout=FETCH_TIMEOUT_S) as response:
                return response.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SpecdecError(f"cannot read {source}: {getattr(exc, 'reason', exc)}") from None
    path = Path(source)
    if not path.is_file():
        raise SpecdecError(f"{source}: no such file")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SpecdecError(f"cannot read {source}: {exc.strerror}") from None


@dataclass(frozen=True)
class EngineCounts:
    """Speculative-decoding counts from one engine's output.

    Per position (when known): accepted[i] of reached[i] drafts accepted draft token i + 1.
    Aggregates: drafts (draft rounds), draft_tokens (tokens proposed), accepted_tokens, k (the
    configured draft length: the longest a draft can be)."""

    source: str
    accepted: list[int] = field(default_factory=list)
    reached: list[int] = field(default_factory=list)
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    k: int | None = None
    emitted_tokens: int | None = None

    @property
    def per_position(self) -> bool:
        return bool(self.reached)


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
MAX_COUNT = 1e15  # larger counts (or rates times counts) are not an engine's: refused as malformed
PROM_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)(?:\s+\d+)?\s*$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
V1_LINE = re.compile(r"SpecDecoding metrics:(?P<body>.*)")
V0_LINE = re.compile(r"Speculative metrics:(?P<body>.*)")
LLAMA_SERVER = re.compile(r"draft acceptance rate = \s*(" + NUMBER + r")\s*\(\s*(\d+) accepted /\s*(\d+) generated\)")
LLAMA_SUMMARY = re.compile(r"^(?:.*\]\s*|\s*)(n_draft|n_predict|n_drafted|n_accept|accept)\s*=\s*(" + NUMBER + r")%?\s*$")


def _count(x, what: str) -> int:
    """A count from the input (a number, or its text): finite and >= 0, rounded; else one clear error."""
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise SpecdecError(f"{what} must be a number, got {str(x)[:40]!r}") from None
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        raise SpecdecError(f"{what} must be a finite count in [0, {MAX_COUNT:g}], got {str(x)[:40]}")
    return int(round(value))


def _field(body: str, name: str, what: str) -> float:
    m = re.search(re.escape(name) + r":\s*(" + NUMBER + ")", body)
    if m is None:
        raise SpecdecError(f"{what} line lacks '{name}': {body.strip()[:120]}")
    return float(m.group(1))


def parse_prometheus(text: str) -> EngineCounts:
    """vLLM's /metrics text: the four spec_decode counters, summed over label sets. Lines that are
    not samples are skipped, so a page saved with log lines around it still reads (prometheus_client's
    parser gives the same counts on every fixture, but refuses such pages and took 8x as long on a
    30,000-line page: 0.86 s against 0.11 s, measured when this was chosen)."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for line in text.splitlines():
        m = PROM_LINE.match(line.strip())
        if m is None or line.lstrip().startswith("#"):
            continue
        name = m.group("name")
        if not name.startswith("vllm:spec_decode_num_") or name.endswith("_created"):
            continue
        base = name.removesuffix("_total")
        value = _count(m.group("value"), name)
        labels = dict(LABEL.findall(m.group("labels") or ""))
        if base == "vllm:spec_decode_num_accepted_tokens_per_pos":
            if "position" not in labels or not labels["position"].isdigit():
                raise SpecdecError(f"vllm:spec_decode_num_accepted_tokens_per_pos without a position label: {line.strip()}")
            per_pos[int(labels["position"])] = per_pos.get(int(labels["position"]), 0.0) + value
        else:
            totals[base] = totals.get(base, 0.0) + value
    if "vllm:spec_decode_num_drafts" not in totals:
        raise SpecdecError("no vllm:spec_decode_num_drafts counter: not a vLLM /metrics page with speculative decoding")
    if not per_pos:
        raise SpecdecError("no vllm:spec_decode_num_accepted_tokens_per_pos counters (position labels) in the metrics")
    k = max(per_pos) + 1
    if sorted(per_pos) != list(range(k)):
        raise SpecdecError(f"per-position counters skip a position: got positions {sorted(per_pos)}")
    drafts = _count(totals["vllm:spec_decode_num_drafts"], "vllm:spec_decode_num_drafts")
    accepted, reached = conditional_from_cumulative(drafts, [_count(per_pos[i], f"position {i}") for i in range(k)])
    return EngineCounts("vllm-prometheus", accepted.tolist(), reached.tolist(), drafts,
                        _int(totals.get("vllm:spec_decode_num_draft_tokens")),
                        _int(totals.get("vllm:spec_decode_num_accepted_tokens")), k)


def _int(x: float | None) -> int | None:
    return None if x is None else _count(x, "a spec_decode counter")


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
        accepted = _count(_field(body, "Accepted", "vLLM SpecDecoding metrics"), "Accepted")
        drafted = _count(_field(body, "Drafted", "vLLM SpecDecoding metrics"), "Drafted")
        accepted_total += accepted
        drafted_total += drafted
        rates_m = re.search(r"Per-position acceptance rate:\s*((?:" + NUMBER + r"\s*(?:,\s*|$))+)", body)
        if rates_m is None or drafted == 0:
            continue
        with_rates += 1
        rates = np.array([float(x) for x in re.findall(NUMBER, rates_m.group(1))])
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
    drafts = _count(drafts_total, "drafts")
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
    k = _count(_field(body, "Number of speculative tokens", what), "Number of speculative tokens")
    draft = _count(_field(body, "Number of draft tokens", what), "Number of draft tokens")
    emitted_m = re.search(r"Number of emitted tokens(?: tokens)?:\s*(\d+)", body)
    if emitted_m is None:
        raise SpecdecError(f"{what} line lacks 'Number of emitted tokens': {body.strip()[:120]}")
    if k < 1 or draft % k:
        raise SpecdecError(f"{what}: {draft} draft tokens are not a multiple of k = {k}")
    drafts, emitted = draft // k, int(emitted_m.group(1))
    if not drafts <= emitted <= drafts * (k + 1):
        raise SpecdecError(f"{what}: {emitted} emitted tokens impossible for {drafts} drafts of {k}")
    return EngineCounts("vllm-log-v0", drafts=drafts, draft_tokens=draft, accepted_tokens=emitted - drafts, k=k,
                        emitted_tokens=emitted)


def parse_llamacpp(lines: list[str]) -> EngineCounts:
    """llama-speculative's summary, or the sum of llama-server's per-request acceptance lines."""
    server = [m for line in lines if (m := LLAMA_SERVER.search(line))]
    if server:
        return EngineCounts("llamacpp-server", draft_tokens=sum(int(m.group(3)) for m in server),
                            accepted_tokens=sum(int(m.group(2)) for m in server))
    summary: dict[str, float] = {}
    for line in lines:
        m = LLAMA_SUMMARY.match(line.rstrip())
        if m:
            summary[m.group(1)] = float(m.group(2))
    missing = [key for key in ("n_draft", "n_drafted", "n_accept") if key not in summary]
    if missing:
        raise SpecdecError("llama.cpp output lacks " + ", ".join(missing) + " (expected llama-speculative's summary "
                           "or llama-server's 'draft acceptance rate' lines)")
    return EngineCounts("llamacpp-speculative", draft_tokens=_count(summary["n_drafted"], "n_drafted"),
                        accepted_tokens=_count(summary["n_accept"], "n_accept"), k=_count(summary["n_draft"], "n_draft"))


def parse_request_metrics(objects: list) -> EngineCounts:
    """vLLM per-request metrics (`--per-request-spec-decode-metrics`): every
    "speculative_decoding" block found in the objects, histograms summed. hist[j] = steps
    that accepted exactly j drafts; by draft length when given (position i is reached only by
    drafts of at least i + 1 tokens)."""
    blocks = [b for obj in objects for b in _find_key(obj, "speculative_decoding") if isinstance(b, dict)]
    if not blocks:
        raise SpecdecError("no 'speculative_decoding' metrics block in the JSON")
    by_length: dict[int, np.ndarray] = {}
    for b in blocks:
        single = b.get("acceptance_histogram")
        hists = b.get("acceptance_histogram_by_draft_length") or (
            {len(single) - 1: single} if isinstance(single, list) and single else None)
        if not isinstance(hists, dict) or not hists:
            raise SpecdecError("a speculative_decoding block lacks acceptance_histogram (a list of counts)")
        for key, hist in hists.items():
            length = _count(key, "a draft length")
            if not isinstance(hist, list) or len(hist) != length + 1:
                raise SpecdecError(f"acceptance histogram for draft length {length} must be a list of {length + 1} counts")
            h = np.array([_count(x, "an acceptance histogram count") for x in hist], dtype=np.int64)
            by_length[length] = by_length.get(length, 0) + h
    k = max(by_length)
    accepted, reached = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    for length, h in by_length.items():  # positions past a draft's length are not reached by it
        acc, rea = accepted_and_reached(h)
        accepted[:length] += acc
        reached[:length] += rea
    drafts = int(sum(h.sum() for h in by_length.values()))
    return EngineCounts("vllm-request", accepted.tolist(), reached.tolist(), drafts,
                        int(sum(h.sum() * n for n, h in by_length.items())), int(accepted.sum()), k)


def _find_key(obj, key: str) -> list:
    if isinstance(obj, dict):
        found = [obj[key]] if key in obj else []
        return found + [x for v in obj.values() if v is not obj.get(key) for x in _find_key(v, key)]
    if isinstance(obj, list):
        return [x for v in obj for x in _find_key(v, key)]
    return []


def parse_specdec_json(data: dict) -> EngineCounts:
    """`specdec decode --json` (stats.reached / stats.accepted per position)."""
    stats = data.get("stats")
    if isinstance(stats, dict) and isinstance(stats.get("reached"), list) and isinstance(stats.get("accepted"), list) \
            and "gamma" in stats:
        reached = [_count(x, "stats.reached") for x in stats["reached"]]
        accepted = [_count(x, "stats.accepted") for x in stats["accepted"]]
        if len(reached) != len(accepted):
            raise SpecdecError("stats.reached and stats.accepted must have one count per draft position each")
        while reached and reached[-1] == 0:  # positions never reached carry no information
            reached, accepted = reached[:-1], accepted[:-1]
        if not reached:
            raise SpecdecError("the decode reached no draft position (no drafts were proposed)")
        return EngineCounts("specdec-decode", accepted, reached, reached[0],
                            _count(stats.get("drafted", 0), "stats.drafted") or None, sum(accepted),
                            _count(stats["gamma"], "stats.gamma"))
    raise SpecdecError("specdec JSON without stats.reached / stats.accepted / stats.gamma (expected `specdec decode "
                       "--json` output)")


def _json_objects(text: str) -> list:
    """One JSON document, or JSON lines (one response per line)."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        pass
    objects = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SpecdecError(f"JSON input does not parse (line {n}: {exc.msg})") from None
    return objects


def read_counts(text: str) -> EngineCounts:
    """Recognise the format of `text` and parse it; a missing or malformed value is a SpecdecError
    naming it (each count goes through `_count`)."""
    stripped = text.lstrip()
    if not stripped:
        raise SpecdecError("the input is empty")
    if stripped.startswith(("{", "[")):
        objects = _json_objects(text)
        if any(_find_key(o, "speculative_decoding") for o in objects):
            return parse_request_metrics(objects)
        if len(objects) == 1 and isinstance(objects[0], dict):
            return parse_specdec_json(objects[0])
        raise SpecdecError("JSON input holds neither vLLM speculative_decoding metrics nor specdec decode stats")
    lines = text.splitlines()
    if "vllm:spec_decode_num_" in text:
        return parse_prometheus(text)
    if any(V1_LINE.search(line) for line in lines):
        return parse_vllm_v1_log(lines)
    if any(V0_LINE.search(line) for line in lines):
        return parse_vllm_v0_log(lines)
    if "draft acceptance rate" in text or re.search(r"^\s*n_(draft|drafted|accept)\s*=", text, re.M):
        return parse_llamacpp(lines)
    raise SpecdecError("unrecognised input: expected vLLM /metrics text, vLLM 'SpecDecoding metrics' or 'Speculative "
                       "metrics' log lines, llama.cpp speculative output, or specdec decode --json")
