"""What every engine format parses into (`EngineCounts`), and the checks each value goes through.

Per position (when the format has it): accepted[i] of reached[i] drafts accepted draft token
i + 1. Aggregates: drafts (draft rounds), draft_tokens (tokens proposed), accepted_tokens, k
(the configured draft length: the longest a draft can be). Counts, never rates, are stored;
a format that has no counts at all (SGLang's gauges and log lines: means over log intervals)
gives `mean_accepted`, the accepted draft tokens per draft averaged over `windows` intervals,
and says so in `note`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from specdec.errors import SpecdecError

NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"  # one way to split any digit run: no backtracking blow-up
RATES = r"\d+(?:\.\d+)?(?:\s*,\s*\d+(?:\.\d+)?)*"  # "0.800, 0.600, 0.380": linear to match or refuse
MAX_COUNT = 1e15  # larger counts (or rates times counts) are not an engine's: refused as malformed
MAX_DRAFT_LENGTH = 1024  # a longer configured draft is not an engine's (and would size arrays): refused
PROM_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)(?:\s+\d+)?\s*$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class EngineCounts:
    """Speculative-decoding counts from one engine's output (see the module's docstring)."""

    source: str
    accepted: list[int] = field(default_factory=list)
    reached: list[int] = field(default_factory=list)
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    k: int | None = None
    emitted_tokens: int | None = None
    steps: int | None = None  # target steps (plain and verifying) the counts came from, when the format gives them
    mean_accepted: float | None = None  # accepted draft tokens per draft: a mean without counts
    windows: int | None = None  # the log intervals mean_accepted averages
    note: str | None = None  # what the format could not give, said in the report

    @property
    def per_position(self) -> bool:
        return bool(self.reached)

    @property
    def draft_share(self) -> float | None:
        """The share of the target's steps that verified a draft (an n-gram drafter finds no match
        on the others); None when the format does not count steps."""
        if self.steps is None or self.drafts is None or self.steps <= 0:
            return None
        return min(1.0, self.drafts / self.steps)

    @property
    def engine(self) -> str | None:
        """The engine the counts came from (its configuration is the default output), or None."""
        from specdec.engines.registry import engine_of_source  # the registry imports the engines, which import this

        return engine_of_source(self.source)


def as_count(x, what: str) -> int:
    """A count from the input (a number, or its text): a whole number in [0, MAX_COUNT]; else one
    clear error (a fraction is not truncated, an absurd magnitude never sizes an array)."""
    if isinstance(x, bool):
        raise SpecdecError(f"{what} must be a number, got {x!r}")
    try:
        value = float(x)
    except (TypeError, ValueError, OverflowError):
        raise SpecdecError(f"{what} must be a number, got {str(x)[:40]!r}") from None
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        raise SpecdecError(f"{what} must be a finite count in [0, {MAX_COUNT:g}], got {str(x)[:40]}")
    if value != round(value):
        raise SpecdecError(f"{what} must be a whole count, got {str(x)[:40]}")
    return int(value)


def as_length(x, what: str) -> int:
    """A draft length (positions) from the input: an integer count in [1, MAX_DRAFT_LENGTH]."""
    n = as_count(x, what)
    if not 1 <= n <= MAX_DRAFT_LENGTH:
        raise SpecdecError(f"{what} must be a draft length in [1, {MAX_DRAFT_LENGTH}], got {str(x)[:40]}")
    return n


def as_rate(x, what: str) -> float:
    """A rate in [0, 1] from the input, else one clear error."""
    try:
        value = float(x)
    except (TypeError, ValueError, OverflowError):
        raise SpecdecError(f"{what} must be a number, got {str(x)[:40]!r}") from None
    if not 0.0 <= value <= 1.0:
        raise SpecdecError(f"{what} must lie in [0, 1], got {str(x)[:40]}")
    return value


def line_field(body: str, name: str, what: str) -> float:
    """The number after "name:" in a log line's body, else an error naming the field."""
    m = re.search(re.escape(name) + r":\s*(" + NUMBER + ")", body)
    if m is None:
        raise SpecdecError(f"{what} line lacks '{name}': {body.strip()[:120]}")
    return float(m.group(1))


def prometheus_samples(text: str, prefix: str) -> list[tuple[str, dict[str, str], str]]:
    """(name, labels, value text) of every Prometheus sample whose name starts with `prefix`,
    `_created` series dropped. Lines that are not samples are skipped, so a page saved with log
    lines around it still reads (prometheus_client's parser gives the same counts on every
    fixture, but refuses such pages and took 8x as long on a 30,000-line page: 0.86 s against
    0.11 s, measured when this was chosen). A line of the engine's that is not a sample, or a
    series given twice, is a SpecdecError."""
    samples, seen = [], set()
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith(prefix):
            continue
        m = PROM_LINE.match(stripped)
        if m is None:  # one of this engine's series, cut or garbled: its count would be lost silently
            raise SpecdecError(f"a malformed sample line (cut short?): {stripped[:120]}")
        if m.group("name").endswith("_created"):
            continue
        labels = dict(LABEL.findall(m.group("labels") or ""))
        series = (m.group("name").removesuffix("_total"), tuple(sorted(labels.items())))
        if series in seen:
            raise SpecdecError(f"the page holds the series {m.group('name')}{{{m.group('labels') or ''}}} twice: "
                               "two pages in one input? give one page")
        seen.add(series)
        samples.append((m.group("name"), labels, m.group("value")))
    return samples


def prometheus_counters(text: str, prefix: str, per_pos: str) -> tuple[dict[str, float], dict[int, float]]:
    """An engine's speculative-decoding counters on a /metrics page: ({name without `_total`:
    value summed over label sets}, {position: the `per_pos` counter summed likewise}) of every
    sample whose name starts with `prefix`; a position label must be 0..9999."""
    totals: dict[str, float] = {}
    positions: dict[int, float] = {}
    for name, labels, raw in prometheus_samples(text, prefix):
        base = name.removesuffix("_total")
        value = as_count(raw, name)
        if base == per_pos:
            position = labels.get("position", "")
            if not position.isdigit() or len(position) > 4:
                raise SpecdecError(f"{per_pos} needs a position label 0..9999, got {position[:20]!r}")
            positions[int(position)] = positions.get(int(position), 0.0) + value
        else:
            totals[base] = totals.get(base, 0.0) + value
    if positions and sorted(positions) != list(range(max(positions) + 1)):
        raise SpecdecError(f"per-position counters skip a position: got positions {sorted(positions)}")
    return totals, positions


SCRAPE_SLACK = 0.01  # counters read one by one while the engine runs may disagree by this share (and 2)


def check_totals(c: EngineCounts) -> EngineCounts:
    """`c` if its counts can come from one engine's run, else a SpecdecError saying which disagree:
    accepted tokens <= draft tokens, and the per-position accepted counts add up to
    the accepted tokens (within SCRAPE_SLACK: a /metrics page is not one atomic snapshot)."""
    if c.accepted_tokens is not None and c.draft_tokens is not None and c.accepted_tokens > c.draft_tokens:
        raise SpecdecError(f"{c.accepted_tokens} accepted tokens of {c.draft_tokens} drafted: the totals disagree")
    if c.reached and c.accepted_tokens is not None:
        total = sum(c.accepted)
        if abs(total - c.accepted_tokens) > max(2, SCRAPE_SLACK * c.accepted_tokens):
            raise SpecdecError(f"the per-position counts accept {total} tokens, the total says {c.accepted_tokens}: "
                               "they disagree")
    return c


def json_objects(text: str) -> list:
    """One JSON document, or JSON lines (one response per line)."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise SpecdecError("the JSON input is nested too deeply to be an engine's output") from None
    objects = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SpecdecError(f"JSON input does not parse (line {n}: {exc.msg})") from None
            except RecursionError:
                raise SpecdecError(f"JSON input line {n} is nested too deeply to be an engine's output") from None
    return objects


def dicts_with(obj, key: str) -> list[dict]:
    """Every JSON object (dict) anywhere in a JSON value that holds `key`."""
    if isinstance(obj, dict):
        return ([obj] if key in obj else []) + [d for v in obj.values() for d in dicts_with(v, key)]
    if isinstance(obj, list):
        return [d for v in obj for d in dicts_with(v, key)]
    return []
