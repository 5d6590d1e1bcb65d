"""The one way a figure is written: Agg canvas, fixed DPI, parent folders created, written to
a temporary name and renamed (a crash never leaves half a figure over a good one); and the one
way a speedup axis on a log scale is labelled: in x units (0.5x, 1x, 2x, 3x), never 2x10^0."""
from __future__ import annotations

import math
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, Locator, NullFormatter

from specdec.paths import writing

DPI = 120


def save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    with writing(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format=path.suffix.lstrip(".") or "png")
    return path


class TimesLocator(Locator):
    """Ticks of a log-scaled ratio axis from the coarsest mantissa ladder that gives at least
    four ticks inside the view (1-2-5, then 1-2-3-5, then finer), so a range such as 0.4..3.5
    reads 0.5x 1x 2x 3x."""

    LADDERS = ((1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 7), (1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 7, 8, 9))

    def __call__(self) -> list[float]:
        lo, hi = self.axis.get_view_interval()
        return self.tick_values(lo, hi)

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        lo, hi = sorted((vmin, vmax))
        if not (lo > 0 and math.isfinite(hi)):
            return []
        ticks: list[float] = []
        for ladder in self.LADDERS:
            ticks = [float(f"{m * 10.0 ** e:.6g}") for e in range(math.floor(math.log10(lo)) - 1,
                                                                 math.ceil(math.log10(hi)) + 1) for m in ladder]
            ticks = [t for t in ticks if lo <= t <= hi]
            if len(ticks) >= 4:
                break
        return ticks


def times_label(value: float, _position: object = None) -> str:
    """1 -> '1x', 1.5 -> '1.5x', 0.25 -> '0.25x'."""
    return f"{value:g}x"


def times_axis(ax: Axes, axes: str = "xy") -> None:
    """Label the log-scaled ratio axes of `ax` named in `axes` ('x', 'y' or 'xy') in x units:
    ticks from `TimesLocator`, labels '1x', '2x', no minor labels."""
    for name in axes:
        axis = ax.xaxis if name == "x" else ax.yaxis
        axis.set_major_locator(TimesLocator())
        axis.set_major_formatter(FuncFormatter(times_label))
        axis.set_minor_formatter(NullFormatter())
