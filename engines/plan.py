"""From an engine's counts to a plan: alpha_i with intervals (`specdec.engines.acceptance`),
the optimal draft length and its predicted speedup (`specdec.simulator.plan`), with a batch
cost table the best draft length per batch-size range (`specdec.simulator.batch`), and the
configuration each engine reads (`specdec.engines.configs`). torch-free."""
from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.configs import engine_config
from specdec.engines.metrics import read_counts
from specdec.simulator.batch import batch_plan, gamma_ranges
from specdec.simulator.plan import make_plan

FETCH_TIMEOUT_S = 10
EXTRAPOLATE_MAX = 16  # draft lengths searched with --extrapolate and no --max-gamma
RANGE_TOLERANCE = 0.02  # a longer draft must beat a shorter one by 2% to get a batch-size range (timing noise)


def read_source(source: str, stdin_text: str | None = None) -> str:
    """The text of a file, '-' (standard input) or an http(s) URL (a Prometheus endpoint)."""
    if source == "-":
        return stdin_text or ""
    if source.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(source, timeout=FETCH_TIMEOUT_S) as response:
                return response.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ValueError(f"cannot read {source}: {getattr(exc, 'reason', exc)}") from None
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"{source}: no such file")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read {source}: {exc.strerror}") from None


def engine_plan(text: str, c: float, draft_length: int | None = None, max_gamma: int | None = None,
                extrapolate: bool = False, verify_cost: tuple[float, ...] | None = None,
                batch_timing: dict[str, Any] | None = None, engine: str | None = None,
                method: str = "ngram") -> dict[str, Any]:
    """Everything `specdec plan --from` reports, as plain values."""
    counts = read_counts(text)
    acc = acceptance_from_counts(counts, draft_length)
    curve_note = None
    if verify_cost is None and batch_timing is not None and batch_timing["batch_sizes"][0] == 1:
        row = batch_timing["seconds"][0]  # the unbatched plan uses the B = 1 costs, floored at v = 1 (noise)
        verify_cost = tuple(max(1.0, t / row[0]) for t in row)
        curve_note = "verify cost v(k) = t(1, k) / t(1, 1) from the batch cost file"
    observed = acc.k_observed
    top = max_gamma if max_gamma is not None else (EXTRAPOLATE_MAX if extrapolate else observed)
    if not extrapolate:
        top = min(top, observed)
    if verify_cost is not None:
        top = min(top, len(verify_cost) - 1)
    plan = make_plan(c=c, alpha_per_position=tuple(acc.alphas), max_gamma=top, verify_cost=verify_cost)
    result: dict[str, Any] = {"source": counts.source, "acceptance": acc.to_dict(), "plan": plan.as_dict(),
                              "positions_observed": observed, "extrapolated": top > observed,
                              "verify_cost_source": curve_note}
    for row in result["plan"]["table"]:
        row["extrapolated"] = row["gamma"] > observed
    gamma = plan.optimal_gamma
    ranges = None
    if batch_timing is not None:
        sizes, seconds = batch_timing["batch_sizes"], batch_timing["seconds"]
        bmax = min(top, len(seconds[0]) - 1)
        bp = batch_plan(acc.alphas, sizes, seconds, c, bmax)
        ranges = gamma_ranges(acc.alphas, sizes, seconds, c, bmax, RANGE_TOLERANCE)
        result["batch"] = {"batch_sizes": list(sizes), "gammas": list(range(bp.speedup.shape[1])),
                           "speedup": bp.speedup.tolist(), "throughput": bp.throughput.tolist(),
                           "latency": bp.latency.tolist(), "best_gamma": bp.best_gamma(RANGE_TOLERANCE).tolist(),
                           "tolerance": RANGE_TOLERANCE,
                           "ranges": [list(r) for r in ranges], "device": batch_timing.get("device"),
                           "context_tokens": batch_timing.get("context_tokens")}
    if engine is not None:
        result["engine_config"] = engine_config(engine, method, gamma, ranges, plan)
    return result
