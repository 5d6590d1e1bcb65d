"""Every file a plan command reads costs from, in one place (torch-free).

A file says what it is in a top-level "kind" field:

- `KIND_ESTIMATE` (`specdec estimate --json`): "verify_cost" v(1..K), "cost" with
  "target_step_seconds", "context_times" (t(1..K) at several context lengths; per category
  under "categories" when the estimate has several), and with `--batch-sizes` a
  "batch_timing" object (t(B, k)); `specdec costs` writes the same kind from the roofline model
  ("source": "roofline"), its "batch_timing" a list of tables when it covers several contexts.
- `KIND_TREE_COSTS` (`benchmarks/bench_costs.py`): the same, plus "verify_step_ms" {N: ms},
  verify steps timed on draft trees of N nodes.
- `KIND_LATTICE_STUDY` (`specdec heads lattice --save`): the lattice study, its rows per
  (method, depth) and, unless run with --no-timing, its own verify steps and heads pass.
- `KIND_SERVE` (`specdec serve-bench`, serve.json): per context length its "timing" t(B, k)
  through the ragged decoder's scorer, and the measured and predicted serving tables.

Files written before the field are read by their shape, as they always were. Anything
unreadable, of another kind or lacking a field is one SpecdecError line naming the file and
what is missing; the command line names the option.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from specdec.errors import SpecdecError
from specdec.simulator.batch import BatchTimes, check_batch_times
from specdec.simulator.checks import check_verify_cost
from specdec.simulator.context import ContextTimes, check_context_times, merge_context_times
from specdec.simulator.trees import steps_from_curve

KIND_ESTIMATE = "specdec.estimate"
KIND_TREE_COSTS = "specdec.tree-costs"
KIND_LATTICE_STUDY = "specdec.lattice-study"
KIND_SERVE = "specdec.serve-bench"
KINDS = (KIND_ESTIMATE, KIND_TREE_COSTS, KIND_LATTICE_STUDY, KIND_SERVE)
COST_KINDS = (KIND_ESTIMATE, KIND_TREE_COSTS)  # the kinds that hold target pass costs

# What a lattice study must hold to be planned (`specdec plan --trees`) and to be drawn (`specdec figures --lattice`).
STUDY_FOR_TREES = ("by_depth", "k")
STUDY_FOR_FIGURES = ("block_efficiency", "oracle_curve", "repetition", "wins")


@dataclass(frozen=True)
class TreeSteps:
    """Verify steps on draft trees, for the tree plan (`specdec.simulator.trees`)."""

    seconds: dict[int, float]  # {N: t(N)}: a target pass verifying N draft nodes, seconds; N = 0 a plain decoding step
    source: str  # where they came from, as the report says it


def read_verify_cost(path: Path) -> tuple[float, ...]:
    """v(1..K) (`plan --verify-cost-file`): a JSON list, or an object holding it under "verify_cost"."""
    data = _read_json(path)
    _check_kind(data, path, COST_KINDS, "a verify-cost file")
    curve = data.get("verify_cost") if isinstance(data, dict) else data
    if not (isinstance(curve, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in curve)):
        raise SpecdecError(f"{path} must hold a JSON list of numbers v(1), ..., v(K) "
                           'or an object {"verify_cost": [...]}')
    try:
        check_verify_cost(curve)
    except SpecdecError as exc:
        raise SpecdecError(f"{path}: {exc}") from None
    return tuple(float(x) for x in curve)


def read_context_times(path: Path) -> ContextTimes:
    """t(1..K) at several context lengths (`plan --context`): the "context_times" of `specdec
    estimate --json`, every category's merged (the same target on the same machine)."""
    data = _read_json(path)
    _check_kind(data, path, (KIND_ESTIMATE,), "an estimate with context times")
    parts = [data] if isinstance(data, dict) else []
    if isinstance(data, dict) and isinstance(data.get("categories"), dict):
        parts = [c for c in data["categories"].values() if isinstance(c, dict)]
    tables = [part["context_times"] for part in parts if isinstance(part.get("context_times"), dict)]
    if not tables:
        raise SpecdecError(f"{path} holds no context_times: write it with `specdec estimate --json` (with timings)")
    try:
        return merge_context_times([check_context_times(t.get("contexts"), t.get("seconds")) for t in tables])
    except SpecdecError as exc:
        raise SpecdecError(f"{path}: context_times: {exc}") from None


def read_batch_times(path: Path) -> list[BatchTimes]:
    """t(B, k) (`plan --batch-cost-file`), one table per context length timed, checked: the
    "batch_timing" object of `specdec estimate --batch-sizes ... --json` (one context) or of
    benchmarks/bench_costs.py, a list of them (`specdec costs --context L1,L2`: one per context),
    or every context's "timing" of `specdec serve-bench` (serve.json)."""
    return batch_times_of(_read_json(path), path)


def batch_times_of(data: Any, path: Path) -> list[BatchTimes]:
    """`read_batch_times` of a file's content already read (`path` names it in every message)."""
    kind = _check_kind(data, path, COST_KINDS + (KIND_SERVE,), "a batch cost file")
    if kind == KIND_SERVE:
        contexts = data.get("contexts")
        timings = [c.get("timing") for c in contexts] if isinstance(contexts, list) and all(
            isinstance(c, dict) for c in contexts) else []
    else:
        timing = data.get("batch_timing") if isinstance(data, dict) else None
        timings = timing if isinstance(timing, list) else [timing]
    if not timings or not all(isinstance(t, dict) and {"batch_sizes", "seconds"} <= set(t) for t in timings):
        raise SpecdecError(f"{path} holds no batch_timing (batch_sizes, seconds): write it with "
                           "`specdec estimate --batch-sizes ... --json` or `specdec serve-bench`")
    tables = []
    for timing in timings:
        try:
            sizes, seconds = check_batch_times(timing["batch_sizes"], timing["seconds"])
        except (ValueError, TypeError) as exc:  # SpecdecError, or numbers numpy cannot read
            raise SpecdecError(f"{path}: batch_timing: {exc}") from None
        context = timing.get("context_tokens")
        if context is not None and not _integer(context, 1, 1 << 24):
            raise SpecdecError(f"{path}: batch_timing's context_tokens must be a whole number of tokens, got "
                               f"{str(context)[:40]}")
        if len(seconds[0]) < 2:
            raise SpecdecError(f"{path}: batch_timing holds t(B, k) for k = 1 only; a plan needs k = 1 .. gamma + 1 "
                               "(time it with --batch-max-k 2 or more)")
        tables.append(BatchTimes(tuple(sizes.tolist()), tuple(tuple(row) for row in seconds.tolist()),
                                 timing.get("device"), context if isinstance(context, int) else None,
                                 _checked_mixed(timing, sizes.tolist(), len(seconds[0]), path)))
    return tables


def mixed_steps(table: Mapping[str, Any]) -> dict[Any, Any]:
    """{K: t_mix(B, 0..B) per batch size} of one batch_timing table (`specdec llamacpp costs --mixed-k`):
    its "mixed", a list of {"k", "seconds"} (one such object in files written before 2026-11-29 07:10
    UTC); {} where none was timed. Unchecked (`read_batch_times` checks): an entry without "k" is
    kept under None, a repeated k under its first entry."""
    mixed = table.get("mixed") or []
    entries = [mixed] if isinstance(mixed, dict) else mixed if isinstance(mixed, list) else [mixed]
    out: dict[Any, Any] = {}
    for m in entries:
        key = m.get("k") if isinstance(m, dict) else None
        out.setdefault(key if isinstance(key, int) and key not in out else (None, len(out)),
                       m.get("seconds") if isinstance(m, dict) else None)
    return out


def _checked_mixed(table: Mapping[str, Any], sizes: list[int], width: int, path: Path
                   ) -> tuple[tuple[int, tuple[tuple[float, ...], ...]], ...]:
    """`mixed_steps` checked: each K an integer in 2..width, once, its rows t_mix(B, 0..B), positive,
    a step with drafting slots dearer than the plain one (else the micro-batches it prices are not)."""
    out = []
    for k, rows in mixed_steps(table).items():
        if not isinstance(k, int) or not 2 <= k <= width:
            raise SpecdecError(f"{path}: batch_timing's mixed steps need one entry per k in 2..{width} with "
                               '"k" and "seconds"')
        ok = isinstance(rows, list) and len(rows) == len(sizes) and all(
            isinstance(row, list) and len(row) == B + 1 and all(_finite(x) and x > 0 for x in row)
            and all(x > row[0] for x in row[1:]) for B, row in zip(sizes, rows))
        if not ok:
            raise SpecdecError(f"{path}: batch_timing's mixed steps at k = {k} must be t_mix(B, 0..B), positive "
                               f"seconds rising above t_mix(B, 0), per batch size {sizes}")
        out.append((k, tuple(tuple(float(x) for x in row) for row in rows)))
    return tuple(sorted(out))


def read_tree_steps(path: Path) -> TreeSteps:
    """Verify steps t(N) on another machine (`plan --trees --verify-cost-file`): the steps timed
    on trees ("verify_step_ms", benchmarks/bench_costs.py), else t(N) = t(1) v(N + 1) from a
    verify-cost curve and its one-token step ("cost.target_step_seconds", `specdec estimate --json`)."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise SpecdecError(f"{path} must hold a JSON object")
    kind = _check_kind(data, path, COST_KINDS, "a verify-cost file")
    steps_ms = data.get("verify_step_ms")
    if kind != KIND_ESTIMATE and isinstance(steps_ms, dict) and steps_ms.get("0"):
        where = data.get("device_name") or data.get("device", "?")
        return TreeSteps(_seconds(steps_ms, path), f"{path} (verify steps timed on trees, {where})")
    if kind == KIND_TREE_COSTS:
        raise SpecdecError(f"{path} ({kind}) lacks verify_step_ms with a plain step of 0 nodes")
    curve = data.get("verify_cost")
    cost = data["cost"] if isinstance(data.get("cost"), dict) else {}
    step = cost.get("target_step_seconds", data.get("target_step_seconds"))
    if isinstance(curve, list) and curve and isinstance(step, (int, float)) and step > 0:
        try:
            steps = steps_from_curve(float(step), curve)
        except (ValueError, TypeError) as exc:
            raise SpecdecError(f"{path}: verify_cost: {exc}") from None
        return TreeSteps(steps, f"{path} (v(1..{len(curve)}), t(1) {1000 * step:.2f} ms)")
    raise SpecdecError(f"{path} needs verify_cost [v(1), ...] and cost.target_step_seconds (`specdec estimate "
                       "--json` without --no-timing) or verify_step_ms (benchmarks/bench_costs.py)")


def read_lattice_study(path: Path, needs: tuple[str, ...] = STUDY_FOR_TREES) -> dict[str, Any]:
    """A saved lattice study (`specdec heads lattice --save`) holding the fields in `needs`."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise SpecdecError(f"{path} must hold a JSON object")
    _check_kind(data, path, (KIND_LATTICE_STUDY,), "a lattice study")
    missing = [key for key in needs if key not in data]
    if "by_depth" in needs and "by_depth" in data and not isinstance(data["by_depth"], list):
        missing.append("by_depth rows")
    if missing:
        raise SpecdecError(f"{path} is not a lattice study (`specdec heads lattice --save`) of this version: "
                           f"no {', '.join(missing)}")
    if "by_depth" in needs:
        _check_rows(data["by_depth"], path)
    for key, (ok, what) in STUDY_FIELDS.items():
        if data.get(key) is not None and not ok(data[key]):
            raise SpecdecError(f"{path}: {key} must be {what}, got {str(data[key])[:60]}")
    return data



def study_tree_steps(study: Mapping[str, Any], path: Path) -> TreeSteps | None:
    """The study's own verify steps timed on trees; None when it was run with --no-timing."""
    if not study.get("verify_step_ms"):
        return None
    return TreeSteps(_seconds(study["verify_step_ms"], path), "the study's verify steps timed on trees")


def _read_json(path: Path) -> Any:
    from specdec.inputs import read_json

    return read_json(path)


def _check_kind(data: Any, path: Path, accepted: tuple[str, ...], what: str) -> str | None:
    """The file's kind, None for a file written before kinds; a kind not in `accepted` is refused."""
    if not isinstance(data, dict) or "kind" not in data:
        return None
    kind = data["kind"]
    if kind in accepted:
        return kind
    if kind in KINDS:
        raise SpecdecError(f"{path} is a {kind} file, not {what}")
    raise SpecdecError(f"{path}: unknown kind {kind!r} (expected {' or '.join(accepted)})")


def _finite(x: Any, low: float = 0.0) -> bool:
    """A real number (not a bool), finite and >= low."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= low


def _check_rows(rows: list, path: Path) -> None:
    """Each row of a study names its method and holds finite numbers where the tree plan reads
    them (a NaN or negative number would become a confident plan)."""
    for i, row in enumerate(rows):
        options = row.get("options") if isinstance(row, dict) else None
        ok = (isinstance(row, dict) and isinstance(row.get("method"), str) and _integer(row.get("depth"))
              and _finite(row.get("block_efficiency"), 1.0) and row["block_efficiency"] <= row["depth"] + 1
              and all(row.get(key) is None or _finite(row.get(key)) for key in ("tree_tokens", "choose_ms"))
              and (options is None or (isinstance(options, dict)
                                       and all(isinstance(options.get(key, 1), int) and 1 <= options.get(key, 1) <= 1024
                                               for key in ("k", "p"))
                                       and ("rescorer" not in options or _finite(options.get("w"))))))
        if not ok:
            raise SpecdecError(f"{path}: by_depth row {i} needs a method, a depth in 1 .. 1024, a "
                               "block_efficiency in [1, depth + 1] (tokens per target pass), finite "
                               "numbers >= 0 (or null) for tree_tokens and choose_ms, and options with integers k "
                               "and p in 1 .. 1024 and, with a rescorer, a finite weight w >= 0")


def _seconds(steps_ms: Any, path: Path) -> dict[int, float]:
    """{N: seconds} from {"N": milliseconds}."""
    try:
        seconds = {int(n): ms / 1000 for n, ms in steps_ms.items()}
    except (AttributeError, ValueError, TypeError):
        raise SpecdecError(f"{path}: verify_step_ms must map draft nodes N to milliseconds, "
                           'e.g. {"0": 10.0, "3": 14.0}') from None
    bad = [n for n, ms in steps_ms.items() if not _finite(ms) or ms == 0 or not 0 <= int(n) <= 4096]
    if bad:
        raise SpecdecError(f"{path}: verify_step_ms[{bad[0]!r}] = {steps_ms[bad[0]]!r}: each N in 0 .. 4096 needs a "
                           "finite positive time in milliseconds")
    return seconds


def _integer(x: Any, low: int = 1, high: int = 1024) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and low <= x <= high


# The lattice study's top-level fields (absent or null: not given), each with its check and what it must be.
STUDY_FIELDS: dict[str, tuple[Any, str]] = {
    "heads_path": (lambda x: isinstance(x, str), "the heads folder's path (a string)"),
    "heads": (_integer, "an integer in 1 .. 1024"),
    "k": (_integer, "the lattice's top-k, an integer in 1 .. 1024"),
    "heads_pass_ms": (_finite, "a finite number of milliseconds >= 0"),
    "rescorers": (lambda x: isinstance(x, dict) and all(isinstance(v, list) and len(v) == 2 and all(
        isinstance(part, str) for part in v) for v in x.values()), 'an object {name: [kind, path]}'),
    "verify_step_ms": (lambda x: isinstance(x, dict), 'an object {"N": milliseconds}'),
}
