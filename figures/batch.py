"""Speedup of speculative decoding vs batch size, one curve per draft length gamma, the best
gamma per batch size marked (`specdec plan --from ... --batch-cost-file ... --figure`). Reads the
batch table of an `EnginePlan` (`specdec.simulator.engine_plan`); no torch."""
from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from specdec.figures.canvas import save
from specdec.simulator.engine_plan import EnginePlan


def batch_figure(engine_plan: EnginePlan, path: Path, title: str = "") -> Path:
    """The figure of `engine_plan.batch` (which must be set), written to `path`."""
    batch, times = engine_plan.batch, engine_plan.batch_times
    if batch is None or times is None:
        raise ValueError("batch_figure needs an engine plan made with batch times")
    sizes, speedup, best = list(times.batch_sizes), batch.speedup.tolist(), engine_plan.best_batch_gamma()
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for g in range(1, batch.speedup.shape[1]):
        ax.plot(sizes, [row[g] for row in speedup], marker="o", ms=3, label=f"gamma = {g}")
    ax.plot(sizes, [row[g] for row, g in zip(speedup, best)], "k*", ms=12, label="best gamma (0: do not speculate)")
    for b, row, g in zip(sizes, speedup, best):
        ax.annotate(str(g), (b, row[g]), textcoords="offset points", xytext=(0, 8), ha="center")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_xlabel("batch size B (sequences per target pass)")
    ax.set_ylabel("speedup over plain batched decoding")
    ax.set_title(title or f"measured t(B, k) on {times.device or '?'}, acceptance from the engine's counts")
    ax.legend(fontsize=8)
    return save(fig, path)
