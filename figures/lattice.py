"""The BPD paper's lattice figures and tables on our data, from a saved lattice study
(`specdec heads lattice --save`): Figure 6 (oracle top-k block efficiency vs k), Figure 7
(block efficiency vs the number of verified paths p, per rescorer), and Tables 3/4/5/9 as
Markdown. No torch."""
from __future__ import annotations

import re
from pathlib import Path

from matplotlib.figure import Figure

from specdec.figures.canvas import save
from specdec.paths import write_atomic


def _series(rows: list[dict]) -> dict[str, list[tuple[int, float, float, float]]]:
    """rescorer ("base" or its name) -> [(p, efficiency, lo, hi)] from the table's method names."""
    out: dict[str, list[tuple[int, float, float, float]]] = {}
    for r in rows:
        m = r["method"]
        if m == "base":
            key, p = "base", 1
        elif (hit := re.fullmatch(r"parallel base p=(\d+)", m)):
            key, p = "base", int(hit.group(1))
        elif (hit := re.fullmatch(r"(.+) rescored", m)):
            key, p = hit.group(1), 1
        elif (hit := re.fullmatch(r"(.+) parallel p=(\d+)", m)):
            key, p = hit.group(1), int(hit.group(2))
        else:
            continue
        out.setdefault(key, []).append((p, r["block_efficiency"], r["ci"][0], r["ci"][1]))
    return {k: sorted(v) for k, v in out.items()}


def figure7_parallel(study: dict, out_dir: Path) -> Path:
    fig = Figure(figsize=(7.0, 4.6), layout="constrained")
    ax = fig.subplots()
    for name, pts in _series(study["block_efficiency"]).items():
        ps = [p for p, *_ in pts]
        ax.errorbar(ps, [e for _, e, _, _ in pts], yerr=[[e - lo for _, e, lo, _ in pts], [hi - e for _, e, _, hi in pts]],
                    marker="o", capsize=3, label=name if name == "base" else f"{name} rescored")
    for r in study["block_efficiency"]:
        if r["method"].startswith("oracle"):
            ax.axhline(r["block_efficiency"], ls="--", lw=0.8, color="grey")
            ax.annotate(r["method"], (1, r["block_efficiency"]), textcoords="offset points", xytext=(2, 3), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({p for pts in _series(study["block_efficiency"]).values() for p, *_ in pts}))
    ax.xaxis.set_major_formatter("{x:g}")  # 1, 2, 4, not 2^0, 2^1, 2^2
    ax.set_xlabel("paths verified together p (1 = one draft)")
    ax.set_ylabel("block efficiency (tokens per target pass)")
    ax.set_title(f"Parallel drafts from the top-{study['k']} lattice ({study['prompts']} prompts, greedy)")
    ax.legend(fontsize=8)
    return save(fig, Path(out_dir) / "lattice_figure7_parallel.png")


def figure6_oracle(study: dict, out_dir: Path) -> Path:
    rows = study["oracle_curve"]
    base = next(r["block_efficiency"] for r in study["block_efficiency"] if r["method"] == "base")
    fig = Figure(figsize=(7.0, 4.6), layout="constrained")
    ax = fig.subplots()
    ks = [r["k"] for r in rows]
    ax.fill_between(ks, [r["ci"][0] for r in rows], [r["ci"][1] for r in rows], alpha=0.2)
    ax.plot(ks, [r["block_efficiency"] for r in rows], marker="o", label="oracle top-k path")
    ax.axhline(base, ls="--", color="grey", label="base heads (top-1)")
    ax.set_xlabel("candidates per head k")
    ax.set_ylabel("block efficiency (tokens per target pass)")
    ax.set_title("Oracle top-k block efficiency: the lattice's headroom")
    ax.legend(fontsize=8)
    return save(fig, Path(out_dir) / "lattice_figure6_oracle.png")


def tables_markdown(study: dict, out_dir: Path) -> Path:
    lines = [f"# Lattice study tables ({study['prompts']} held-out prompts, {study['blocks']} blocks, greedy target "
             f"text, {study['heads']} heads, top-{study['k']} lattice; weights "
             + ", ".join(f"{n} {w:g}" for n, w in study["weights"].items()) + ")", "",
             "## Block efficiency (the paper's Tables 4 and 9)", "",
             "| method | block efficiency | 95% CI | vs base |", "|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['block_efficiency']:.3f} | [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | "
              f"{100 * r['relative']:+.1f}% |" for r in study["block_efficiency"]]
    lines += ["", "## Consecutive repetition (Table 3)", "", "| drafts | consecutive repetition | mean max run |",
              "|---|---|---|"]
    lines += [f"| {r['method']} | {100 * r['consecutive_repetition']:.1f}% | {r['max_run']:.2f} |"
              for r in study["repetition"]]
    lines += ["", "## Rescored vs base drafts (Table 5)", "",
              "| vs base | wins | ties | losses | wins by repair | losses by regress |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {100 * r['wins']:.1f}% | {100 * r['ties']:.1f}% | {100 * r['losses']:.1f}% | "
              f"{100 * r['repair']:.1f}% | {100 * r['regress']:.1f}% |" for r in study["wins"]]
    path = Path(out_dir) / "lattice_tables.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, "\n".join(lines) + "\n")


def write_lattice(study: dict, out_dir: Path) -> list[Path]:
    return [figure6_oracle(study, out_dir), figure7_parallel(study, out_dir), tables_markdown(study, out_dir)]
