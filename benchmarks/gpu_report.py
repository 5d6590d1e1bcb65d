"""The GPU check's comparison (issue 54): measured t(B, k, L) (benchmarks/gpu_check.py's
gpu-raw.json) against `specdec costs` on the GPU's preset, and against the roofline with its
device terms fitted on some cells and judged on the others; the plan's gamma per batch size from
measured and from modelled costs; measured cost files a user hands to `plan --batch-cost-file`.

    python benchmarks/gpu_report.py RAW.json --out DIR [--cost-files]

Errors are (predicted - measured) / measured. Held-out cells: every cell of a shape the fit did
not see (the fit sees the first shape, the smallest, only), and the ratio t(B, k) / t(B, 1) the
plan uses.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from specdec.simulator.batch import batch_plan
from specdec.simulator.hardware import DTYPES, PRESETS, TERA, Device
from specdec.simulator.roofline import model_shape, pass_terms

sys.path.insert(0, str(Path(__file__).resolve().parent))
ALPHAS = (0.6, 0.8)  # acceptance per position for the gamma comparison
FIT_SHAPES = ("llama-3.2-1b", "qwen2.5-14b")  # the shapes the preset's fitted terms come from


def measured_cube(shape: dict) -> np.ndarray:
    """seconds [L, B, k] of one shape's cells (NaN where not measured)."""
    sizes, contexts = shape["batch_sizes"], shape["contexts"]
    cube = np.full((len(contexts), len(sizes), shape["max_k"]), np.nan)
    for c in shape["cells"]:
        cube[contexts.index(c["L"]), sizes.index(c["B"]), c["k"] - 1] = c["seconds"]
    return cube


def modelled_cube(shape: dict) -> np.ndarray | None:
    report = (shape.get("modelled") or {}).get("report")
    if not report:
        return None
    timing = report["batch_timing"]
    timing = timing if isinstance(timing, list) else [timing]
    return np.array([t["seconds"] for t in timing])


def roofline_cube(shape: dict, device: Device, dtype: str) -> np.ndarray:
    """t [L, B, k] of the roofline on `device` (what `specdec costs` computes)."""
    s, fmt = model_shape(shape["config"]), DTYPES[dtype]
    b = np.array(shape["batch_sizes"])[None, :, None]
    k = np.arange(1, shape["max_k"] + 1)[None, None, :]
    ctx = np.array(shape["contexts"])[:, None, None]
    return pass_terms(s, fmt, 1, b, k, ctx).seconds(device, device.flops_for(fmt))


def errors(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return (predicted - measured) / measured


def summary(err: np.ndarray) -> dict[str, float]:
    e = np.abs(err[np.isfinite(err)])
    return {"cells": int(e.size), "median_abs_pct": 100 * float(np.median(e)) if e.size else float("nan"),
            "worst_abs_pct": 100 * float(e.max()) if e.size else float("nan"),
            "within_15_pct": int((e <= 0.15).sum())}


def ratios(cube: np.ndarray) -> np.ndarray:
    """t(B, k) / t(B, 1) [L, B, k - 1] for k = 2..K."""
    return cube[..., 1:] / cube[..., :1]


def fit_device(raw: dict, base: Device, shapes: list[dict]) -> tuple[Device, dict]:
    """The preset's three fitted terms (`specdec.simulator.hardware`: GPU_LAUNCH_S, the floor per
    kernel; GH100_KV_BYTES_PER_S, the cache reads' rate; GPU_VERIFY_LAYER_S, what a layer adds at
    k > 1) fitted again (least squares in relative error, over log-parameters) on the cells of
    `shapes`; everything else kept."""
    from scipy.optimize import least_squares

    dtype = raw["dtype"]
    meas = [measured_cube(s) for s in shapes]

    def device(x: np.ndarray) -> Device:
        launch, kv, verify = np.exp(x)
        return replace(base, launch_s=float(launch), kv_bandwidth=float(kv), verify_layer_s=float(verify))

    def residual(x: np.ndarray) -> np.ndarray:
        d = device(x)
        return np.concatenate([errors(roofline_cube(s, d, dtype), m)[np.isfinite(m)] for s, m in zip(shapes, meas)])

    start = [base.launch_s, base.kv_bandwidth or base.bandwidth, base.verify_layer_s or 1e-5]
    d = device(least_squares(residual, np.log(start), method="trf").x)
    return d, {"fitted_on": [s["name"] for s in shapes], "bandwidth_bytes_per_s": d.bandwidth,
               "peak_flops": d.flops_for(DTYPES[dtype]), "launch_s": d.launch_s, "kv_bytes_per_s": d.kv_bandwidth,
               "verify_layer_s": d.verify_layer_s, "kernels_per_layer": d.kernels_per_layer, "overlap": d.overlap}


def gamma_table(target: np.ndarray, batch_sizes: list[int], c: np.ndarray, alpha: float) -> list[int]:
    """Best gamma per batch size (0..K-1) for a constant acceptance alpha and per-B draft cost c."""
    return [int(batch_plan([alpha], [b], target[i:i + 1], float(c[i])).best_gamma()[0])
            for i, b in enumerate(batch_sizes)]


def speedup_at(target: np.ndarray, i: int, c: float, alpha: float, gamma: int) -> float:
    return float(batch_plan([alpha], [1], target[i:i + 1], c).speedup[0, gamma])


def plan_comparison(shapes: list[dict], measured: list[np.ndarray], modelled: list[np.ndarray]) -> list[dict]:
    """gamma per batch size from measured and modelled t for target = the second shape, drafts:
    c = 0 (an n-gram or feature draft) and the first shape as an independent draft model
    (c(B) = t_draft(B, 1) / t_target(B, 1), measured or modelled alike)."""
    if len(shapes) < 2:
        return []
    rows = []
    target, draft = shapes[1], shapes[0]
    common = [b for b in target["batch_sizes"] if b in draft["batch_sizes"]]
    it, idr = [target["batch_sizes"].index(b) for b in common], [draft["batch_sizes"].index(b) for b in common]
    for li, context in enumerate(target["contexts"]):
        if context not in draft["contexts"]:
            continue
        ld = draft["contexts"].index(context)
        tm, tp = measured[1][li][it], modelled[1][li][it]
        if np.isnan(tm).any() or np.isnan(measured[0][ld][idr]).any():
            continue
        drafts = {"c=0": (np.zeros(len(common)), np.zeros(len(common))),
                  f"{draft['name']} draft": (measured[0][ld][idr, 0] / tm[:, 0], modelled[0][ld][idr, 0] / tp[:, 0])}
        for label, (cm, cp) in drafts.items():
            for alpha in ALPHAS:
                gm, gp = gamma_table(tm, common, cm, alpha), gamma_table(tp, common, cp, alpha)
                loss = [1 - speedup_at(tm, i, cm[i], alpha, gp[i]) / speedup_at(tm, i, cm[i], alpha, gm[i])
                        for i in range(len(common))]
                rows.append({"target": target["name"], "L": context, "draft": label, "alpha": alpha,
                             "batch_sizes": common, "gamma_measured": gm, "gamma_modelled": gp,
                             "speedup_measured_best": [speedup_at(tm, i, cm[i], alpha, gm[i]) for i in range(len(common))],
                             "loss_pct": [100 * x for x in loss]})
    return rows


def cost_file(raw: dict, shape: dict, cube: np.ndarray) -> dict:
    """A measured cost file (`specdec plan --batch-cost-file`, kind specdec.estimate), one batch
    table per context."""
    env = raw["environment"]
    where = f"{env.get('gpu') or 'cpu'}, captured static decoder, {raw['dtype']} (benchmarks/gpu_check.py)"
    b1 = shape["batch_sizes"].index(1) if 1 in shape["batch_sizes"] else None
    timings = [{"context_tokens": n, "batch_sizes": shape["batch_sizes"], "seconds": cube[i].tolist(), "device": where}
               for i, n in enumerate(shape["contexts"])]
    out = {"kind": "specdec.estimate", "source": "measured", "target": shape["name"], "environment": env,
           "batch_timing": timings if len(timings) > 1 else timings[0]}
    if b1 is not None:
        row = cube[0][b1]
        out |= {"verify_cost": (row / row[0]).tolist(),
                "cost": {"target_step_seconds": float(row[0]), "verify_seconds": row.tolist()},
                "context_times": {"contexts": shape["contexts"], "seconds": [cube[i][b1].tolist()
                                                                              for i in range(len(shape["contexts"]))]}}
    return out


def build(raw: dict) -> dict[str, Any]:
    """Everything the Markdown shows, as one JSON object."""
    dtype, env = raw["dtype"], raw["environment"]
    preset = PRESETS.get(raw["hardware"])
    shapes = [s for s in raw["shapes"] if s["cells"] and modelled_cube(s) is not None]
    full = [s for s in shapes if not np.isnan(measured_cube(s)).any()]
    measured = [measured_cube(s) for s in shapes]
    modelled = [modelled_cube(s) for s in shapes]
    out: dict[str, Any] = {"environment": env, "hardware": raw["hardware"], "ceilings": raw.get("ceilings"),
                           "logits_check": raw.get("logits_check"), "shapes": [], "errors": {}}
    train = [s for s in full if s["name"] in FIT_SHAPES] or full[:1]
    fitted, fit_info = fit_device(raw, preset, train) if preset and train else (None, None)
    out["fit"] = fit_info
    copy = (raw.get("ceilings") or {}).get("copy_bytes_per_s")
    for s, m, p in zip(shapes, measured, modelled):
        shape = model_shape(s["config"])
        weight_bytes = shape.resident_weights(1) * DTYPES[dtype].weight_bytes - (
            0 if shape.tied else shape.vocab * shape.hidden * DTYPES[dtype].weight_bytes)  # input rows: N, not V
        row: dict[str, Any] = {"name": s["name"], "parameters": shape.resident_weights(1),
                               "batch_sizes": s["batch_sizes"], "contexts": s["contexts"], "max_k": s["max_k"],
                               "complete": s["complete"], "measured_ms": (1000 * m).tolist(),
                               "preset_ms": (1000 * p).tolist(), "preset": summary(errors(p, m)),
                               "preset_ratios": summary(errors(ratios(p), ratios(m))),
                               "eager_ms": [1000 * e["seconds"] for e in s["eager"]],
                               "modelled_command": s["modelled"].get("command"), "profile": s.get("profile"),
                               "attention": s.get("attention"), "fused": s.get("fused")}
        if copy and 1 in s["batch_sizes"]:
            floor = weight_bytes / copy  # read once at the copy's rate (bytes read + written per second)
            row["t11_ms"] = [1000 * float(m[i][s["batch_sizes"].index(1), 0]) for i in range(len(s["contexts"]))]
            row["weights_over_copy_ms"] = 1000 * floor
            row["t11_over_floor"] = row["t11_ms"][0] / (1000 * floor)
        if fitted is not None:
            f = roofline_cube(s, fitted, dtype)
            row["fitted_ms"] = (1000 * f).tolist()
            row["fitted"] = summary(errors(f, m))
            row["fitted_ratios"] = summary(errors(ratios(f), ratios(m)))
            row["held_out"] = s["name"] not in fit_info["fitted_on"]
        out["shapes"].append(row)
    out["plan"] = plan_comparison(shapes, measured, modelled)
    return out


def markdown(rep: dict) -> str:
    env, c = rep["environment"], rep.get("ceilings") or {}
    lines = [f"# GPU check: {env.get('gpu') or 'cpu'}, torch {env['torch']}, CUDA {env.get('cuda')}, "
             f"driver {env.get('driver')}, {env['date']}", "",
             f"Measured ceilings: device copy {c.get('copy_bytes_per_s', float('nan')) / 1e12:.2f} TB/s (read + "
             f"written), bf16 matrix product {c.get('matmul_flops', float('nan')) / TERA:.0f} TFLOP/s. "
             f"Preset: `{rep['hardware']}`.", ""]
    lc = rep.get("logits_check") or {}
    if "error" in lc:
        lines += [f"Logits check failed: `{lc['error'].splitlines()[-1]}`", ""]
    elif lc:
        lines += [f"Logits check (captured static pass vs transformers eager, 2 layers, {lc['dtype']}, k = 4): "
                  f"max |diff| {lc['max_abs_diff']:.3g} on logits up to {lc['logit_scale']:.3g}, top-1 agreement "
                  f"{100 * lc['top1_agreement']:.0f} %.", ""]
    if rep.get("fit"):
        f = rep["fit"]
        lines += [f"Refitted on {', '.join(f['fitted_on'])} only: {1e6 * f['launch_s']:.2f} µs x "
                  f"{f['kernels_per_layer']} kernels per layer, cache reads at {f['kv_bytes_per_s'] / 1e12:.2f} TB/s, "
                  f"{1e6 * f['verify_layer_s']:.1f} µs a layer at k > 1 (preset: bandwidth "
                  f"{f['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, {f['peak_flops'] / TERA:.0f} TFLOP/s, overlap "
                  f"{f['overlap']}).", ""]
    lines += ["| shape | cells | t(1,1) ms (L0) | uncaptured t(1,1) ms | weights/copy ms | preset median/worst % | "
              "preset ratio median/worst % | refit median/worst % | refit ratio median/worst % | held out |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for s in rep["shapes"]:
        def mw(key: str) -> str:
            v = s.get(key)
            return f"{v['median_abs_pct']:.1f} / {v['worst_abs_pct']:.1f}" if v else "-"
        lines.append(f"| {s['name']} | {s['preset']['cells']} | {s.get('t11_ms', [float('nan')])[0]:.3f} | "
                     f"{s['eager_ms'][0] if s['eager_ms'] else float('nan'):.3f} | "
                     f"{s.get('weights_over_copy_ms', float('nan')):.3f} | {mw('preset')} | {mw('preset_ratios')} | "
                     f"{mw('fitted')} | {mw('fitted_ratios')} | {s.get('held_out', '-')} |")
    floor = (rep.get("ceilings") or {}).get("kernel_floor_s")
    if floor:
        lines += ["", f"A captured graph of tiny kernels: {1e6 * floor:.2f} µs per kernel."]
    for s in rep["shapes"]:
        p = s.get("profile") or {}
        if "kernels" in p:
            lines.append(f"{s['name']}: one uncaptured B = 1, k = 1 pass at L = {p['L']} runs {p['kernels']} kernels, "
                         f"{1000 * p['kernel_seconds']:.3f} ms of kernel time (attention {s.get('attention')}, "
                         f"elementwise pieces {'compiled' if s.get('fused') else 'eager'}).")
    for s in rep["shapes"]:
        for i, n in enumerate(s["contexts"]):
            lines += ["", f"## {s['name']}, L = {n}: measured ms (preset error %)", "",
                      "| B | " + " | ".join(f"k={k}" for k in range(1, s["max_k"] + 1)) + " |",
                      "|---|" + "---|" * s["max_k"]]
            for j, b in enumerate(s["batch_sizes"]):
                cells = []
                for k in range(s["max_k"]):
                    mv, pv = s["measured_ms"][i][j][k], s["preset_ms"][i][j][k]
                    cells.append("-" if mv != mv else f"{mv:.3f} ({100 * (pv - mv) / mv:+.0f})")
                lines.append(f"| {b} | " + " | ".join(cells) + " |")
    if rep["plan"]:
        lines += ["", "## Plan: gamma per batch size from measured / modelled (preset) costs", "",
                  "| target | L | draft | alpha | B | gamma measured | gamma modelled | loss % |", "|---|---|---|---|---|---|---|---|"]
        for r in rep["plan"]:
            lines.append(f"| {r['target']} | {r['L']} | {r['draft']} | {r['alpha']} | {r['batch_sizes']} | "
                         f"{r['gamma_measured']} | {r['gamma_modelled']} | {max(r['loss_pct']):.1f} (worst) |")
    return "\n".join(lines) + "\n"


def write_report(raw: dict, out: Path, cost_files: bool = False) -> dict:
    from specdec.strict_json import to_json

    rep = build(raw)
    (out / "gpu-report.json").write_text(to_json(rep, indent=1) + "\n")
    (out / "gpu-report.md").write_text(markdown(rep))
    if cost_files:
        for s in raw["shapes"]:
            if s["complete"]:
                path = out / f"gpu-costs-{s['name']}.json"
                path.write_text(to_json(cost_file(raw, s, measured_cube(s)), indent=1) + "\n")
    return rep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("raw", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cost-files", action="store_true", help="also write each shape's measured cost file")
    parser.add_argument("--remodel", action="store_true",
                        help="run `specdec costs` here again for every shape (a modelled table that failed there)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    raw = json.loads(args.raw.read_text())
    if args.remodel:
        from gpu_check import modelled

        for shape in raw["shapes"]:
            shape["modelled"] = modelled(shape["name"], shape["config"], shape, raw["hardware"], args.out)
    write_report(raw, args.out, args.cost_files)
    print((args.out / "gpu-report.md").read_text())


if __name__ == "__main__":
    main()
