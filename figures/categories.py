"""Predicted vs measured speedup over prompt categories: one colour per category, one marker per
temperature, the extended model (ii) and the estimator-only model (iii), on log axes spanning
the whole measured range (a `ValidationSuite`; Agg canvas, no pyplot state)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from specdec.figures.canvas import save, times_axis
from specdec.reference.validation.config import TOLERANCE
from specdec.reference.validation.suite import ValidationSuite

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:grey")
MARKERS = ("o", "^", "s", "D")


def figure_by_category(suite: ValidationSuite, out_dir: Path) -> Path:
    fig = Figure(figsize=(12, 5.5))
    rows = suite.rows()
    temps = sorted({r.temperature for _, r in rows})
    for ax, key, title in ((fig.add_subplot(1, 2, 1), "extended", "(ii) extended model (decode's acceptance)"),
                           (fig.add_subplot(1, 2, 2), "extended_estimated", "(iii) from the estimator alone")):
        values = [r.measured for _, r in rows] + [getattr(r, key) for _, r in rows]
        lo, hi = min(values) / 1.15, max(values) * 1.15
        grid = np.geomspace(lo, hi, 50)
        ax.plot(grid, grid, color="black", lw=1, label="predicted = measured")
        ax.fill_between(grid, grid * (1 - TOLERANCE), grid * (1 + TOLERANCE), color="grey", alpha=0.2,
                        label=f"+-{100 * TOLERANCE:.0f}%")
        for ci, category in enumerate(suite.results):
            for ti, t in enumerate(temps):
                sel = [r for c, r in rows if c == category and r.temperature == t]
                ax.scatter([r.measured for r in sel], [getattr(r, key) for r in sel], color=COLOURS[ci % len(COLOURS)],
                           marker=MARKERS[ti % len(MARKERS)], alpha=0.8, label=f"{category}, t={t:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        times_axis(ax)
        ax.set_xlabel("measured speedup (wall clock)")
        ax.set_ylabel("predicted speedup")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
    fig.axes[0].legend(fontsize=6, loc="upper left", ncol=2)
    fig.suptitle("Predicted vs measured speedup by category")
    fig.tight_layout()
    return save(fig, Path(out_dir) / "validation_by_category.png")
