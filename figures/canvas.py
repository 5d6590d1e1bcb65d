"""The one way a figure is written: Agg canvas, fixed DPI, parent folders created, written to
a temporary name and renamed (a crash never leaves half a figure over a good one)."""
from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from specdec.paths import writing

DPI = 120


def save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    with writing(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format=path.suffix.lstrip(".") or "png")
    return path
