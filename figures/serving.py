"""Speedup vs batch size for `specdec serve-bench`: one panel per method, one colour per context
length; measured points (95% intervals) over the ragged batch model's predicted lines. No torch."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from matplotlib.figure import Figure

from specdec.figures.canvas import save


def serving_figure(result: Mapping[str, Any], path: Path) -> Path:
    contexts = result["contexts"]
    names = [m["method"] for m in contexts[0]["methods"] if m["method"] != "baseline"]
    fig = Figure(figsize=(4.2 * max(1, len(names)), 4.2), layout="constrained")
    axes = fig.subplots(1, max(1, len(names)), squeeze=False)[0]
    for ax, name in zip(axes, names):
        for i, ctx in enumerate(contexts):
            m = next(x for x in ctx["methods"] if x["method"] == name)
            sizes = [p["batch"] for p in m["points"]]
            colour = f"C{i}"
            ax.plot(sizes, [p["predicted_speedup"] for p in m["points"]], "-", color=colour,
                    label=f"context {ctx['context']}: predicted")
            ax.errorbar(sizes, [p["speedup"] for p in m["points"]],
                        yerr=[[p["speedup"] - p["ci"][0] for p in m["points"]],
                              [p["ci"][1] - p["speedup"] for p in m["points"]]],
                        fmt="o", color=colour, ms=4, capsize=2, label=f"context {ctx['context']}: measured")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("batch size B")
        ax.set_ylabel("throughput speedup over plain batched decoding")
        ax.legend(fontsize=7)
    return save(fig, path)
