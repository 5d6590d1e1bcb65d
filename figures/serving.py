"""Speedup vs batch size for `specdec serve-bench`: one panel per drafter, one line per draft
length gamma (colour) and context length (line style): measured points with their 95%
intervals over the ragged batch model's predicted lines. No torch."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from matplotlib.figure import Figure

from specdec.figures.canvas import save

STYLES = ("-", "--", ":", "-.")


def serving_figure(result: Mapping[str, Any], path: Path) -> Path:
    contexts = result["contexts"]
    methods = [m["method"] for m in contexts[0]["methods"] if m["method"] != "baseline"]
    drafters = list(dict.fromkeys(name.rsplit(" gamma=", 1)[0] for name in methods))
    gammas = list(dict.fromkeys(int(name.rsplit(" gamma=", 1)[1]) for name in methods))
    fig = Figure(figsize=(5.2 * max(1, len(drafters)), 4.4), layout="constrained")
    axes = fig.subplots(1, max(1, len(drafters)), squeeze=False)[0]
    for ax, drafter in zip(axes, drafters):
        for i, ctx in enumerate(contexts):
            for j, gamma in enumerate(gammas):
                m = next(x for x in ctx["methods"] if x["method"] == f"{drafter} gamma={gamma}")
                points = m["points"]
                sizes = [p["batch"] for p in points]
                colour, style = f"C{j}", STYLES[i % len(STYLES)]
                ax.plot(sizes, [p["predicted_speedup"] for p in points], style, color=colour, lw=1.2,
                        label=f"gamma {gamma}, context {ctx['context']}")
                ax.errorbar(sizes, [p["speedup"] for p in points],
                            yerr=[[p["speedup"] - p["ci"][0] for p in points], [p["ci"][1] - p["speedup"] for p in points]],
                            fmt="o" if i == 0 else "s", color=colour, ms=4, capsize=2, mfc="white" if i else colour)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.set_title(drafter if len(drafter) <= 40 else "..." + drafter[-37:], fontsize=10)
        ax.set_xlabel("batch size B (requests decoded at once)")
        ax.set_ylabel("throughput speedup over plain batched decoding", fontsize=9)
        ax.legend(fontsize=7)
    # two short lines: one line of this length is wider than a one-panel canvas and was cut at both ends
    fig.suptitle("markers: measured, with 95% intervals (filled: the first context)\n"
                 "lines: predicted by the ragged batch model", fontsize=10)
    return save(fig, path)
