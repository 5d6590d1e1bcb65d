"""The roofline model (`specdec.simulator.roofline`, `specdec costs`) against measured t(B, k, L):
error per cell, (predicted - measured) / measured.

    python benchmarks/bench_roofline.py --out roofline-check.json --md roofline-tables.md

1. The H100 tables in benchmarks/data (SmolLM2-135M, bf16 and fp32, transformers' eager
   forward): the h100-sxm preset as it stands, then with the per-kernel floor FITTED on the
   cells of B = 1, 4, 16, 64 (least squares in relative error) and the error reported on the
   other cells (B = 2, 8, 32) only.
2. This CPU, nothing fitted: the `measured` device (STREAM triad bandwidth, fp32 matrix-product
   rate, per-operation floor, and the operations per decoder layer counted in one scored pass)
   against the stored CPU table (benchmarks/data/costs-cpu-avx2.json) and a fresh timing of the
   default target at several contexts and of a larger model built from its config with random
   weights (a dense model's pass time does not depend on the weights' values), both through
   `specdec.reference.estimate.batch_timing.time_batched_passes` (what `specdec estimate
   --batch-sizes` and benchmarks/bench_costs.py time). Beside it, a diagnostic: the same model
   with the bandwidth eager F.linear achieves for one row instead of the triad's.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

DATA = Path(__file__).parent / "data"
FIT_BATCHES = (1, 4, 16, 64)  # the H100 cells the per-kernel floor is fitted on; the others are reported
# SmolLM2-360M's shape (a larger local model, random weights)
LARGER = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 960,
          "intermediate_size": 2560, "num_attention_heads": 15, "num_key_value_heads": 5, "head_dim": 64,
          "vocab_size": 49152, "tie_word_embeddings": True, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5}


def count_ops(model: torch.nn.Module, context: int) -> int:
    """Operations one scored pass (B = 1, k = 1, `context` cached tokens) dispatches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from specdec.reference.model.batch_scorer import BatchScorer
    from specdec.reference.core.seams import Proposal

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    scorer = BatchScorer(model, 1, context + 2)
    scorer.start(0, list(range(1, context + 2)))
    with Count():
        scorer.score([Proposal(torch.tensor([], dtype=torch.long))])
    return Count.n


def gemv_bandwidth(rows: int, cols: int, total_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """Bytes per second eager F.linear reads fp32 weights of shape [rows, cols] at for one input
    row, over distinct matrices of `total_bytes` in all (far beyond the caches), best of repeats:
    the bandwidth the decoder's own matrix-vector products achieve on the model's shapes, a
    diagnostic beside the triad (not part of the `measured` device)."""
    weights = [torch.rand(rows, cols) for _ in range(-(-total_bytes // (4 * rows * cols)))]
    x = torch.rand(1, cols)
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for w in weights:
            torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - start)
    return 4 * rows * cols * len(weights) / best


def cells(measured: list[list[float]], predicted: np.ndarray, batch_sizes: list[int], context: int,
          keep: tuple[int, ...] | None = None) -> list[dict]:
    """One row per (B, k): measured and predicted ms and the error in percent."""
    return [{"B": b, "k": k + 1, "L": context, "measured_ms": 1000 * m, "predicted_ms": 1000 * float(p),
             "error_pct": 100 * (float(p) - m) / m}
            for b, row, prow in zip(batch_sizes, measured, predicted) if keep is None or b in keep
            for k, (m, p) in enumerate(zip(row, prow))]


def fit_launch(rest: np.ndarray, measured: np.ndarray, kernels: int) -> float:
    """Seconds per kernel x minimizing sum ((rest + kernels x - m) / m)^2 (closed form)."""
    a, r = kernels / measured, (measured - rest) / measured
    return float(max(0.0, (a * r).sum() / (a * a).sum()))


def summary(rows: list[dict], ratios: bool = False) -> dict:
    """Errors in percent over the cells; ratios: of t(B, k) / t(B, 1) for k >= 2 instead, what the
    batch plan's speedup E t(B, 1) / (t(B, gamma + 1) + gamma c t(B, 1)) depends on."""
    if ratios:
        one = {(r["B"], r["L"]): r for r in rows if r["k"] == 1}
        e = np.array([100 * ((r["predicted_ms"] / one[r["B"], r["L"]]["predicted_ms"])
                             / (r["measured_ms"] / one[r["B"], r["L"]]["measured_ms"]) - 1)
                      for r in rows if r["k"] > 1])
    else:
        e = np.array([r["error_pct"] for r in rows])
    return {"cells": len(e), "median_abs_pct": float(np.median(np.abs(e))), "max_abs_pct": float(np.abs(e).max()),
            "mean_pct": float(e.mean())}


def brief(s: dict) -> str:
    return f"median |error| {s['median_abs_pct']:.0f}%, max {s['max_abs_pct']:.0f}%, mean {s['mean_pct']:+.0f}%"


def markdown(title: str, rows: list[dict], note: str = "") -> str:
    """B rows, k columns, 'measured / predicted (error %)' per cell, one table per context."""
    out = [f"### {title}", "", note, ""] if note else [f"### {title}", ""]
    for context in sorted({r["L"] for r in rows}):
        part = [r for r in rows if r["L"] == context]
        ks = sorted({r["k"] for r in part})
        out += [f"L = {context}: ms measured / predicted (error)", "",
                "| B | " + " | ".join(f"k={k}" for k in ks) + " |", "|---" * (len(ks) + 1) + "|"]
        for b in sorted({r["B"] for r in part}):
            line = {r["k"]: f"{r['measured_ms']:.1f} / {r['predicted_ms']:.1f} ({r['error_pct']:+.0f}%)"
                    for r in part if r["B"] == b}
            out.append(f"| {b} | " + " | ".join(line[k] for k in ks) + " |")
        out.append("")
    out += [f"{len(rows)} cells: {brief(summary(rows))}", "",
            f"t(B, k) / t(B, 1), k >= 2 (what the plan's speedup depends on): {brief(summary(rows, ratios=True))}"]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", default="128,512,2048", help="contexts of the fresh default-target timing")
    ap.add_argument("--batch-sizes", default="1,2,4,8,16")
    ap.add_argument("--max-k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-larger", action="store_true", help="skip the larger random-weight model")
    ap.add_argument("--out", type=Path, required=True, help="every cell as JSON")
    ap.add_argument("--md", type=Path, required=True, help="the tables as Markdown")
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, LlamaConfig

    from specdec.reference.data.default_model import default_target_path
    from specdec.reference.estimate.batch_timing import time_batched_passes
    from specdec.reference.estimate.limits import matmul_flops, op_seconds, triad_bandwidth
    from specdec.simulator.hardware import DTYPES, EAGER_KERNELS_PER_LAYER, PRESETS, Device
    from specdec.simulator.roofline import KERNELS_OUTSIDE_LAYERS, model_shape, pass_seconds

    start = time.perf_counter()
    target = default_target_path()
    smol_config = json.loads((target / "config.json").read_text())
    smol = model_shape(smol_config)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    per_layer = round((count_ops(model, 128) - KERNELS_OUTSIDE_LAYERS) / smol.layers)
    cpu = Device("this CPU", triad_bandwidth(), {"fp32": matmul_flops()}, 0.0, op_seconds(), per_layer, None, 0.0)
    gemv = replace(cpu, bandwidth=gemv_bandwidth(smol.intermediate, smol.hidden))
    report = {"machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
              "torch": torch.__version__, "cpu": {"bandwidth_gb_s": cpu.bandwidth / 1e9,
                                                  "fp32_gflop_s": cpu.peak_flops["fp32"] / 1e9,
                                                  "op_floor_us": 1e6 * cpu.launch_s, "ops_per_layer": per_layer,
                                                  "gemv_gb_s": gemv.bandwidth / 1e9,
                                                  "EAGER_KERNELS_PER_LAYER": EAGER_KERNELS_PER_LAYER}}
    md = [f"machine: {report['machine']}, {report['threads']} threads, torch {torch.__version__}; measured device: "
          f"triad {cpu.bandwidth / 1e9:.1f} GB/s, fp32 matmul {cpu.peak_flops['fp32'] / 1e9:.0f} GFLOP/s, "
          f"op floor {1e6 * cpu.launch_s:.2f} µs, {per_layer} operations per decoder layer (counted); diagnostic: "
          f"eager one-row F.linear reads {smol.intermediate} x {smol.hidden} weights at "
          f"{gemv.bandwidth / 1e9:.1f} GB/s\n"]

    # 1. H100 tables: the preset as it stands, then the per-kernel floor fitted on FIT_BATCHES only.
    for name in ("bf16", "fp32"):
        data = json.loads((DATA / f"costs-h100-{name}.json").read_text())["batch_timing"]
        sizes, measured = data["batch_sizes"], data["seconds"]
        b, k = np.array(sizes)[:, None], np.arange(1, len(measured[0]) + 1)[None, :]
        preset = pass_seconds(smol, DTYPES[name], PRESETS["h100-sxm"], 1, b, k, data["context_tokens"])
        eager = replace(PRESETS["h100-sxm"], kernels_per_layer=per_layer, launch_s=0.0)
        rest = pass_seconds(smol, DTYPES[name], eager, 1, b, k, data["context_tokens"])
        kernels = smol.layers * per_layer + KERNELS_OUTSIDE_LAYERS
        fit_rows = np.isin(sizes, FIT_BATCHES)
        launch = fit_launch(rest[fit_rows], np.array(measured)[fit_rows], kernels)
        fitted = rest + kernels * launch
        held_out = tuple(x for x in sizes if x not in FIT_BATCHES)
        as_is = cells(measured, preset, sizes, data["context_tokens"])
        rows = cells(measured, fitted, sizes, data["context_tokens"], held_out)
        report[f"h100_{name}"] = {"preset": as_is, "fitted_launch_us": 1e6 * launch, "held_out": rows,
                                  "summary_preset": summary(as_is), "summary_held_out": summary(rows),
                                  "ratio_summary_held_out": summary(rows, ratios=True)}
        md.append(markdown(f"H100 {name}, SmolLM2-135M (benchmarks/data/costs-h100-{name}.json)", rows,
                           f"Per-kernel floor FITTED on B = {', '.join(map(str, FIT_BATCHES))} (all k): "
                           f"{1e6 * launch:.1f} µs x {kernels} operations; cells shown: the held-out B = "
                           f"{', '.join(map(str, held_out))}. The preset as it stands (4 µs x 12 kernels per layer): "
                           f"median |error| {summary(as_is)['median_abs_pct']:.0f}%."))

    # 2a. The stored CPU table, nothing fitted.
    data = json.loads((DATA / "costs-cpu-avx2.json").read_text())["batch_timing"]
    sizes, measured = data["batch_sizes"], data["seconds"]
    b, k = np.array(sizes)[:, None], np.arange(1, len(measured[0]) + 1)[None, :]
    rows = cells(measured, pass_seconds(smol, DTYPES["fp32"], cpu, 1, b, k, data["context_tokens"]), sizes,
                 data["context_tokens"])
    diag = cells(measured, pass_seconds(smol, DTYPES["fp32"], gemv, 1, b, k, data["context_tokens"]), sizes,
                 data["context_tokens"])
    report["cpu_stored"] = {"cells": rows, "summary": summary(rows), "ratio_summary": summary(rows, ratios=True),
                            "gemv_cells": diag, "gemv_summary": summary(diag)}
    md.append(markdown("CPU, stored table (benchmarks/data/costs-cpu-avx2.json, SmolLM2-135M fp32)", rows,
                       f"diagnostic, F.linear's bandwidth instead of the triad's: {brief(summary(diag))}"))

    # 2b. Fresh timings on this machine: the default target at several contexts, a larger model at the first.
    sizes = [int(x) for x in args.batch_sizes.split(",")]
    contexts = [int(x) for x in args.contexts.split(",")]
    tokens = torch.randint(0, smol.vocab, (max(contexts) + 64,), generator=torch.Generator().manual_seed(0)).tolist()
    runs = [("default target (SmolLM2-135M, fp32)", model, smol, contexts)]
    if not args.no_larger:
        torch.manual_seed(0)
        larger = AutoModelForCausalLM.from_config(LlamaConfig(**LARGER), dtype=torch.float32).eval()
        runs.append(("SmolLM2-360M shape, random weights, fp32", larger, model_shape(LARGER), contexts[:1]))
    for title, net, shape, lengths in runs:
        rows, whole, diag = [], [], []
        for context in lengths:
            timing = time_batched_passes(net, tokens, sizes, context, args.max_k, args.repeats)
            b, k = np.array(sizes)[:, None], np.arange(1, args.max_k + 1)[None, :]
            for out, device, grouped in ((rows, cpu, True), (whole, cpu, False), (diag, gemv, True)):
                out += cells(timing.seconds, pass_seconds(shape, DTYPES["fp32"], device, 1, b, k, context,
                                                          per_group=grouped), sizes, context)
        report[f"cpu_fresh: {title}"] = {"cells": rows, "summary": summary(rows), "whole_pass_summary": summary(whole),
                                         "ratio_summary": summary(rows, ratios=True), "gemv_cells": diag,
                                         "gemv_summary": summary(diag)}
        md.append(markdown(f"CPU, fresh: {title}", rows,
                           f"whole-pass maximum instead of per group: {brief(summary(whole))}; diagnostic, "
                           f"F.linear's bandwidth instead of the triad's: {brief(summary(diag))}"))
        del net
    report["seconds"] = time.perf_counter() - start
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    args.md.write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
