"""Figures read as a newcomer expects: log-scaled speedup axes labelled 1x, 2x, 3x (not 2x10^0),
and serve-bench's title and labels inside its canvas."""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from specdec.figures.canvas import TimesLocator, times_axis
from specdec.figures.serving import serving_figure


def test_times_ticks_from_the_coarsest_ladder_with_four_ticks() -> None:
    assert TimesLocator().tick_values(0.44, 3.5) == [0.5, 1.0, 2.0, 3.0]
    assert TimesLocator().tick_values(0.3, 30) == [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]
    assert TimesLocator().tick_values(0.9, 1.6) == [0.9, 1.0, 1.25, 1.5]  # the finest ladder


def test_log_speedup_axes_read_in_x_units() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0.45, 3.2], [0.5, 3.0])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.4, 3.6)
    ax.set_ylim(0.4, 3.6)
    times_axis(ax)
    FigureCanvasAgg(fig).draw()
    for axis in (ax.xaxis, ax.yaxis):
        labels = [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_text()]
        assert labels == ["0.5x", "1x", "2x", "3x"], labels


def _serve_result(drafter: str) -> dict:
    def point(b: int, s: float) -> dict:
        return {"batch": b, "speedup": s, "ci": [s - 0.05, s + 0.05], "predicted_speedup": s * 1.02}
    methods = [{"method": "baseline", "points": []},
               {"method": f"{drafter} gamma=2", "points": [point(1, 1.4), point(4, 1.0), point(16, 0.7)]}]
    return {"contexts": [{"context": 128, "methods": methods}, {"context": 1024, "methods": methods}]}


def test_serve_figure_keeps_its_title_and_labels_inside_the_canvas(tmp_path, monkeypatch) -> None:
    import specdec.figures.serving as serving

    drawn: list[Figure] = []
    monkeypatch.setattr(serving, "save", lambda fig, path: drawn.append(fig) or path)
    serving_figure(_serve_result("lookup"), tmp_path / "serve.png")  # one panel: the narrowest canvas
    (fig,) = drawn
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    canvas = fig.bbox
    texts = list(fig.texts) + [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    for text in texts:
        box = text.get_window_extent(renderer)
        assert canvas.x0 <= box.x0 and box.x1 <= canvas.x1 and canvas.y0 <= box.y0 and box.y1 <= canvas.y1, \
            (text.get_text(), box, canvas)
