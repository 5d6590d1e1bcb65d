"""Speedup of speculative decoding vs batch size, one curve per draft length gamma, the best
gamma per batch size marked (`specdec plan --from ... --batch-cost-file ... --figure`). Reads the
`batch` block of `specdec.engines.plan.engine_plan`; no torch."""
from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from specdec.figures.canvas import save


def batch_figure(batch: dict, path: Path, title: str = "") -> Path:
    sizes, speedup, best = batch["batch_sizes"], batch["speedup"], batch["best_gamma"]
    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for g in batch["gammas"][1:]:
        ax.plot(sizes, [row[g] for row in speedup], marker="o", ms=3, label=f"gamma = {g}")
    ax.plot(sizes, [row[g] for row, g in zip(speedup, best)], "k*", ms=12, label="best gamma (0: do not speculate)")
    for b, row, g in zip(sizes, speedup, best):
        ax.annotate(str(g), (b, row[g]), textcoords="offset points", xytext=(0, 8), ha="center")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_xlabel("batch size B (sequences per target pass)")
    ax.set_ylabel("speedup over plain batched decoding")
    ax.set_title(title or f"measured t(B, k) on {batch.get('device') or '?'}, acceptance from the engine's counts")
    ax.legend(fontsize=8)
    return save(fig, path)
