"""BiLD's speed-quality trade-off (Kim et al., NeurIPS 2023, Figures 4, 5 and 10): quality
against the target vs speedup, one curve per rollback policy (docs/bild.md). Reads rows of
`specdec.reference.bild.sweep.tradeoff_row`; imports neither torch nor the models.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from specdec.figures.canvas import save

PANELS = (("match_rate", "greedy match rate (first N tokens)"),
          ("argmax_rate", "target-argmax rate (teacher-forced)"),
          ("mean_log_likelihood", "target log-likelihood (nats/token)"))


def _order(row: dict) -> float:
    """Order of points along a curve: fallback threshold, handover period, or gamma."""
    if row["kind"] == "sd":
        return row["gamma"]
    if row["fallback"] == 0:
        return row["max_little_steps"]
    return row["fallback"]


def bild_tradeoff(rows: Sequence[dict], out_dir: Path, title: str = "", name: str = "bild_tradeoff.png",
                  x_key: str = "speedup") -> Path:
    """Quality vs speedup for every method in `rows` (three panels, one per quality measure).

    rows: dicts with keys kind, family, fallback, max_little_steps, gamma, `x_key` and the
        quality keys of PANELS; the row of kind "ar" is the baseline at speedup 1.
    x_key: "speedup" (wall clock) or "speedup_cpu" (process CPU time).
    """
    families: dict[str, list[dict]] = {}
    for row in rows:
        families.setdefault(row["family"], []).append(row)
    fig = Figure(figsize=(16.0, 5.0), layout="constrained")
    axes = fig.subplots(1, len(PANELS))
    for ax, (key, ylabel) in zip(axes, PANELS):
        for family, members in families.items():
            members = sorted(members, key=_order)
            xs, ys = [r[x_key] for r in members], [r[key] for r in members]
            if members[0]["kind"] == "ar":
                ax.plot(xs, ys, "kX", markersize=11, label=family)
                ax.axhline(ys[0], color="k", linewidth=0.8, linestyle=":")
                continue
            style = dict(marker="s", linestyle="--", color="k") if members[0]["kind"] == "sd" else dict(marker="o")
            line, = ax.plot(xs, ys, label=family, **style)
            if members[0]["kind"] == "sd":
                for r, x, y in zip(members, xs, ys):
                    ax.annotate(f"γ={r['gamma']}", (x, y), textcoords="offset points", xytext=(0, -12),
                                ha="center", fontsize=7)
            # bigger markers for larger fallback thresholds (more fallbacks), as in BiLD Fig. 10
            if members[0]["kind"] == "bild" and members[0]["fallback"] > 0:
                ax.scatter(xs, ys, s=[20 + 120 * r["fallback"] for r in members], color=line.get_color(),
                           alpha=0.35)
        ax.axvline(1.0, color="grey", linewidth=0.6)
        clock = "CPU time" if x_key == "speedup_cpu" else "wall clock"
        ax.set(xlabel=f"speedup over autoregressive (per token, {clock})", ylabel=ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title or "BiLD: speed vs quality (marker size ~ fallback threshold; dashed: exact SD, γ)")
    return save(fig, Path(out_dir) / name)
