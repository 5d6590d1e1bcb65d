"""Figures of a validation run: predicted vs measured speedup, speedup by gamma, v(k), beta.

Names follow Leviathan et al. (ICML 2023): `alpha` acceptance rate, beta the acceptance
probability of one prefix, `gamma` draft tokens per iteration, v(k) the verify-cost curve.

Each function reads a typed `ValidationResult` (estimator and simulator outputs only), writes
one PNG into the folder it is given, and returns its path (Agg canvas, no pyplot state).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from specdec.figures.canvas import save
from specdec.reference.validation.config import TOLERANCE
from specdec.reference.validation.rows import ValidationResult, ValidationRow

MODELS = (("paper", "(i) paper: Thm 8, teacher-forced alpha, v = 1", "o"),
          ("extended", "(ii) extended: measured acceptance + v(k) + c + overhead", "s"),
          ("extended_estimated", "(iii) extended, estimated acceptance", "^"))


def _measured_label(rows: list[ValidationRow]) -> str:
    return ("measured speedup (drift-corrected)" if all(r.measured_corrected is not None for r in rows)
            else "measured speedup (wall clock)")


def figure_predicted_vs_measured(result: ValidationResult, out_dir: Path) -> Path:
    """Predicted (y) vs measured (x) speedup for every configuration and model, with y = x and +-10%."""
    rows = result.rows
    fig = Figure(figsize=(11, 5))
    tol = TOLERANCE
    for ax, keys, title in ((fig.add_subplot(1, 2, 1), MODELS, "all models"),
                            (fig.add_subplot(1, 2, 2), MODELS[1:], "extended models (zoom)")):
        values = [r.measured_best for r in rows] + [getattr(r, k) for r in rows for k, _, _ in keys]
        lo, hi = min(values) * 0.9, max(values) * 1.1
        grid = np.linspace(lo, hi, 2)
        ax.plot(grid, grid, color="black", lw=1, label="predicted = measured")
        ax.fill_between(grid, grid * (1 - tol), grid * (1 + tol), color="grey", alpha=0.2,
                        label=f"+-{100 * tol:.0f}%")
        for key, label, marker in keys:
            for t, color in zip(sorted({r.temperature for r in rows}), ("tab:blue", "tab:red", "tab:green")):
                sel = [r for r in rows if r.temperature == t]
                ax.scatter([r.measured_best for r in sel], [getattr(r, key) for r in sel], marker=marker, color=color,
                           alpha=0.8, label=f"{label}, t={t:g}")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(_measured_label(rows))
        ax.set_ylabel("predicted speedup")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=6, loc="upper left")
    fig.suptitle("Speculative decoding: predicted vs measured speedup")
    fig.tight_layout()
    return save(fig, Path(out_dir) / "validation_predicted_vs_measured.png")


def figure_relative_error(result: ValidationResult, out_dir: Path) -> Path:
    """Relative error (predicted / measured - 1) of each model for every configuration."""
    rows = result.rows
    labels = [f"{r.drafter} t={r.temperature:g} g={r.gamma}" for r in rows]
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(6, 0.35 * len(rows) + 2), 4.5))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.27
    for i, (key, label, _) in enumerate(MODELS):
        ax.bar(x + (i - 1) * width, [100 * (getattr(r, key) / r.measured_best - 1) for r in rows], width, label=label)
    tol = 100 * TOLERANCE
    ax.axhspan(-tol, tol, color="grey", alpha=0.2)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=75, fontsize=7)
    ax.set_ylabel("prediction / " + _measured_label(rows).replace("measured speedup", "measured")
                  + " - 1 (%)", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save(fig, Path(out_dir) / "validation_relative_error.png")


def figure_speedup_by_gamma(result: ValidationResult, out_dir: Path) -> Path:
    """Measured speedup vs gamma (points) and the three predictions (lines), one panel per temperature."""
    rows = result.rows
    temps = sorted({r.temperature for r in rows})
    names = list(dict.fromkeys(r.drafter for r in rows))
    fig = Figure(figsize=(5.5 * len(temps), 4.5))
    styles = {"paper": ":", "extended": "-", "extended_estimated": "--"}
    for i, t in enumerate(temps):
        ax = fig.add_subplot(1, len(temps), i + 1)
        for j, name in enumerate(names):
            sel = sorted((r for r in rows if r.temperature == t and r.drafter == name), key=lambda r: r.gamma)
            color = f"C{j}"
            g = [r.gamma for r in sel]
            ax.plot(g, [r.measured for r in sel], "o", color=color, label=f"{name} measured (wall)")
            if all(r.measured_corrected is not None for r in sel):
                ax.plot(g, [r.measured_corrected for r in sel], "x", color=color)
            for key, style in styles.items():
                ax.plot(g, [getattr(r, key) for r in sel], style, color=color, lw=1)
        ax.axhline(1, color="black", lw=0.8)
        ax.set_xticks(sorted({r.gamma for r in rows}))
        ax.set_xlabel("gamma")
        ax.set_ylabel("speedup over autoregressive")
        ax.set_title(f"t={t:g}  (o wall, x drift-corrected; dotted: paper, solid: extended, "
                     "dashed: extended estimated)", fontsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, Path(out_dir) / "validation_speedup_by_gamma.png")


def figure_verify_cost(result: ValidationResult, out_dir: Path) -> Path:
    """The measured verify-cost curve v(k) and the loop overhead 1 + o(k - 1), vs the paper's v = 1."""
    v = np.asarray(result.timing.verify_cost)
    k = np.arange(1, v.size + 1)
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(k, v, "o-", label="v(k) = t(k) / t(1), measured")
    first = next(iter(result.costs))[0]
    for (drafter, t), c in result.costs.items():
        if drafter == first:
            o = np.asarray(c.overhead)
            ax.plot(k, v + o, ".--", lw=1, label=f"v(k) + o(k-1), t={t:g}")
    ax.axhline(1, color="black", lw=0.8, label="paper's model (v = 1)")
    ax.set_xlabel("tokens in one target pass, k")
    ax.set_ylabel("time / one-token pass")
    ax.set_title(f"verify cost at {result.timing.context_tokens} tokens of context, "
                 f"t(1) = {1000 * result.timing.step_seconds:.1f} ms", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, Path(out_dir) / "validation_verify_cost.png")


def figure_beta_histograms(result: ValidationResult, out_dir: Path) -> Path:
    """Distribution of beta = sum min(p, q) over teacher-forced positions, per drafter and temperature."""
    temps = sorted({t for _, t in result.alphas})
    fig = Figure(figsize=(5.5 * len(temps), 4))
    for i, t in enumerate(temps):
        ax = fig.add_subplot(1, len(temps), i + 1)
        for j, ((drafter, _), a) in enumerate(x for x in result.alphas.items() if x[0][1] == t):
            edges = np.asarray(a.beta_histogram["edges"])
            counts = np.asarray(a.beta_histogram["counts"], dtype=float)
            ax.step(edges[:-1], counts / counts.sum(), where="post", color=f"C{j}",
                    label=f"{drafter} (alpha {a.alpha:.3f})")
        ax.set_xlabel("beta")
        ax.set_ylabel("fraction of positions")
        ax.set_yscale("log")
        ax.set_title(f"t={t:g}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, Path(out_dir) / "validation_beta.png")


def write_all(result: ValidationResult, out_dir: Path) -> list[Path]:
    """Every validation figure into out_dir."""
    return [figure_predicted_vs_measured(result, out_dir), figure_relative_error(result, out_dir),
            figure_speedup_by_gamma(result, out_dir), figure_verify_cost(result, out_dir),
            figure_beta_histograms(result, out_dir)]
