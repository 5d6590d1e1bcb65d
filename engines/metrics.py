"""What serving engines report about speculative decoding: the source read, its format
recognised, and the engine's parser called (every engine of `specdec.engines.registry`, in its
order; specdec's own `decode --json` here). Each returns `specdec.engines.counts.EngineCounts`:
per-position sources give conditional counts (accepted_i of reached_i); aggregate sources give
accepted of drafted tokens only, which `specdec.engines.acceptance` turns into an i.i.d. alpha
under a stated model. A source that cannot be read, or parses but lacks what it needs, is a
SpecdecError naming what is missing. Formats and their sources: docs/engines.md.
"""
from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from pathlib import Path

from specdec.engines import registry
from specdec.engines.counts import MAX_DRAFT_LENGTH, EngineCounts, as_count, as_length, check_totals, json_objects
from specdec.errors import SpecdecError
from specdec.simulator.counts import check_conditional

FETCH_DEADLINE_S = 10.0  # a whole URL answer: connect, headers and body (a /metrics page takes milliseconds)
MAX_SOURCE_BYTES = 256 << 20  # larger is not one engine's counts (a long log: keep its metrics lines, grep them)
MAX_URL_BYTES = 16 << 20  # a /metrics page or a response is kilobytes


def read_source(source: str, stdin_text: str | None = None) -> str:
    """The text of a file, '-' (standard input) or an http(s) URL (a Prometheus endpoint); a
    URL answers within FETCH_DEADLINE_S in all and MAX_URL_BYTES, a file holds at most
    MAX_SOURCE_BYTES, else one SpecdecError line."""
    if source == "-":
        text = stdin_text or ""
        if len(text) > MAX_SOURCE_BYTES:
            raise SpecdecError(f"standard input holds more than {MAX_SOURCE_BYTES >> 20} MiB: give the metrics "
                               "lines only")
        return text
    if source.startswith(("http://", "https://")):
        return _fetch(source)
    path = Path(source)
    if not path.is_file():
        what = "not a regular file (a device, FIFO or folder)" if path.exists() else "no such file"
        raise SpecdecError(f"{source}: {what}")
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise SpecdecError(f"{source} is larger than {MAX_SOURCE_BYTES >> 20} MiB: keep its speculative-decoding "
                               "lines (e.g. grep 'SpecDecoding metrics') and give those")
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SpecdecError(f"cannot read {source}: {exc.strerror}") from None


def _fetch(url: str) -> str:
    """The body of `url`, read in a daemon thread joined with one overall deadline (a server
    sending a byte every few seconds never trips a per-read timeout) and cut off past
    MAX_URL_BYTES; every failure (refused, not HTTP, too slow, too large) is one SpecdecError."""
    box: dict[str, object] = {}

    def read() -> None:
        try:
            with urllib.request.urlopen(url, timeout=FETCH_DEADLINE_S) as response:
                body = response.read(MAX_URL_BYTES + 1)
            box["body"] = body
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            box["error"] = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}".strip()

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(FETCH_DEADLINE_S)
    if worker.is_alive():
        raise SpecdecError(f"cannot read {url}: no complete answer within {FETCH_DEADLINE_S:g} s")
    if "error" in box:
        raise SpecdecError(f"cannot read {url}: {box['error'][:200]}")
    body = box["body"]
    assert isinstance(body, bytes)
    if len(body) > MAX_URL_BYTES:
        raise SpecdecError(f"cannot read {url}: the answer exceeds {MAX_URL_BYTES >> 20} MiB (not a /metrics page)")
    return body.decode("utf-8", errors="replace")


def parse_specdec_json(data: dict) -> EngineCounts:
    """`specdec decode --json` (stats.reached / stats.accepted per position)."""
    stats = data.get("stats")
    if isinstance(stats, dict) and isinstance(stats.get("reached"), list) and isinstance(stats.get("accepted"), list) \
            and "gamma" in stats:
        if len(stats["reached"]) > MAX_DRAFT_LENGTH:
            raise SpecdecError(f"stats.reached has {len(stats['reached'])} positions, more than a draft's "
                               f"{MAX_DRAFT_LENGTH}")
        reached = [as_count(x, "stats.reached") for x in stats["reached"]]
        accepted = [as_count(x, "stats.accepted") for x in stats["accepted"]]
        if len(reached) != len(accepted):
            raise SpecdecError("stats.reached and stats.accepted must have one count per draft position each")
        check_conditional(accepted, reached)
        while reached and reached[-1] == 0:  # positions never reached carry no information
            reached, accepted = reached[:-1], accepted[:-1]
        if not reached:
            raise SpecdecError("the decode reached no draft position (no drafts were proposed)")
        return EngineCounts("specdec-decode", accepted, reached, reached[0],
                            as_count(stats.get("drafted", 0), "stats.drafted") or None, sum(accepted),
                            as_length(stats["gamma"], "stats.gamma"))
    raise SpecdecError("specdec JSON without stats.reached / stats.accepted / stats.gamma (expected `specdec decode "
                       "--json` output)")


def read_counts(text: str) -> EngineCounts:
    """Recognise the format of `text` and parse it; a missing or malformed value is a SpecdecError
    naming it."""
    stripped = text.lstrip()
    if not stripped:
        raise SpecdecError("the input is empty")
    json_error = None
    if stripped.startswith(("{", "[")):  # JSON, or a log whose lines start with "[timestamp]"
        try:
            objects = json_objects(text)
        except SpecdecError as exc:
            json_error = exc
        else:
            for engine in registry.engines():
                counts = engine.parse_json(objects)
                if counts is not None:
                    return check_totals(counts)
            if len(objects) == 1 and isinstance(objects[0], dict):
                return check_totals(parse_specdec_json(objects[0]))
            raise SpecdecError(f"JSON input holds none of: {registry.formats_json()}, specdec decode stats")
    found = [(engine.label, counts) for engine in registry.engines() if (counts := engine.parse_text(text)) is not None]
    if len(found) > 1:
        raise SpecdecError(f"the input holds the output of {' and '.join(label for label, _ in found)}: give one "
                           "engine's")
    if found:
        return check_totals(found[0][1])
    if json_error is not None:
        raise json_error
    raise SpecdecError(f"unrecognised input: expected {registry.formats_text()}, or JSON ({registry.formats_json()}, "
                       "specdec decode --json)")
