"""`specdec costs`: t(B, k, L) of a target (and the draft's c) from config.json alone, on a named
device or this machine, as a cost file every planner reads (`specdec plan --batch-cost-file`).

Thin: parse and check the options (one line naming the option, exit status 2, before anything is
measured), call `specdec.simulator.roofline`, print a table or one JSON object, write --out
through a temporary name. torch is imported only for `--hardware measured`. The model and its
measured errors: docs/roofline.md.
"""
from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from specdec.cli.common import MAX_DECODE_GAMMA, json_option
from specdec.cli.outputs import OutputPath
from specdec.cli.types import Number, NumberList
from specdec.errors import SpecdecError
from specdec.simulator.hardware import DTYPES, EAGER_KERNELS_PER_LAYER, GB, PRESETS, TERA, Device, Dtype, overridden
from specdec.simulator.roofline import GIB, ModelShape, MemoryFit, memory_fit, model_shape, pass_seconds
from specdec.inputs import read_json
from specdec.strict_json import to_json

MAX_BATCH = 4096
MAX_TP = 64
# Rates and sizes a device can have, so no denormal or overflowing figure reaches the model:
# 1 kB/s .. 1 PB/s, 1 MFLOP/s .. 1 EFLOP/s, 1 MiB .. 1 PiB.
RATE = Number(float, 1e-6, 1e6)
Model = tuple[Path, ModelShape]  # a --config or --draft-config: its path and shape


class ModelConfig(click.ParamType):
    """A Hugging Face config.json, or a folder holding one: converts to (path, ModelShape)."""

    name = "config"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        path = Path(value)
        path = path / "config.json" if path.is_dir() else path
        try:
            config = read_json(path)
        except SpecdecError as exc:
            self.fail(f"{exc} (a config.json)", param, ctx)
        if not isinstance(config, dict):
            self.fail(f"{path} must hold a JSON object (a model's config.json)", param, ctx)
        try:
            return path, model_shape(config)
        except SpecdecError as exc:
            self.fail(f"{path}: {exc}", param, ctx)


@click.command()
@click.option("--config", "target", required=True, type=ModelConfig(), metavar="CONFIG",
              help="The target's config.json (or its folder): layers, widths, heads, KV heads, vocabulary, experts.")
@click.option("--draft-config", "draft", type=ModelConfig(), default=None, metavar="CONFIG",
              help="A draft model's config.json: c = t_draft(B, 1) / t_target(B, 1) per batch size (same device, "
                   "dtype and --tp).")
@click.option("--dtype", type=click.Choice(list(DTYPES)), default="bf16", show_default=True,
              help="Weights' format; int4/int8/fp8 keep activations and the KV cache in 16 bits.")
@click.option("--hardware", required=True, type=click.Choice([*PRESETS, "measured"]),
              help="A device preset (public dense peaks, docs/roofline.md) or measured: this machine's STREAM triad "
                   "bandwidth, fp32 matrix-product rate and per-operation floor.")
@click.option("--bandwidth-gbs", type=RATE, default=None,
              help="Override: achieved memory bandwidth, GB/s (GPU presets: the datasheet's x 0.885, docs/roofline.md).")
@click.option("--tflops", type=RATE, default=None, help="Override: peak TFLOP/s for --dtype.")
@click.option("--launch-us", type=Number(float, 0, 1e6), default=None, help="Override: floor per kernel, µs.")
@click.option("--kernels-per-layer", type=Number(int, 0, 10_000), default=None,
              help="Override: kernels one decoder layer launches.")
@click.option("--memory-gib", type=RATE, default=None, help="Override: memory per device, GiB.")
@click.option("--link-gbs", type=RATE, default=None,
              help="Override: interconnect bandwidth per direction, GB/s (all-reduce under --tp).")
@click.option("--link-us", type=Number(float, 0, 1e6), default=None, help="Override: latency of one all-reduce, µs.")
@click.option("--tp", type=Number(int, 1, MAX_TP), default=1, show_default=True,
              help="Tensor parallelism: weights and heads split over this many devices.")
@click.option("--batch-sizes", default="1,2,4,8,16,32", show_default=True, metavar="B1,B2,...",
              type=NumberList(int, 1, MAX_BATCH, increasing=True, what="batch sizes"), help="Batch sizes B.")
@click.option("--max-k", type=Number(int, 1, MAX_DECODE_GAMMA + 1), default=8, show_default=True,
              help="t(B, k) for k = 1..max-k new tokens per sequence.")
@click.option("--context", "contexts", default="1024", show_default=True, metavar="L1,L2,...",
              type=NumberList(int, 1, 1 << 20, increasing=True, what="context lengths"),
              help="Cached tokens per sequence; several: one table each (`specdec plan --context L` interpolates).")
@click.option("--out", type=OutputPath(dir_okay=False, path_type=Path), default=None,
              help="Write the cost file here (`specdec plan --batch-cost-file`, `--verify-cost-file`).")
@json_option
def costs(target, draft, dtype, hardware, bandwidth_gbs, tflops, launch_us, kernels_per_layer, memory_gib, link_gbs,
          link_us, tp, batch_sizes, max_k, contexts, out, as_json):
    """Roofline t(B, k, L) of the target from its config alone (no weights): the table per context,
    the draft's c per batch size, the memory each batch size needs; refused when it does not fit.

    \b
      specdec costs --config 70b/config.json --draft-config 1b/config.json --hardware h100-sxm --tp 8 --out costs.json
      specdec plan --from metrics.txt --c 0.05 --batch-cost-file costs.json --engine vllm"""
    from specdec.paths import write_atomic

    fmt = DTYPES[dtype]
    device = PRESETS.get(hardware) or Device("measured: this machine", 0.0, {}, _ram_bytes(), 0.0,
                                             EAGER_KERNELS_PER_LAYER, None, 0.0)
    device = overridden(device, fmt, bandwidth=_scaled(bandwidth_gbs, GB), flops=_scaled(tflops, TERA),
                        launch_s=_scaled(launch_us, 1e-6), memory_bytes=_scaled(memory_gib, GIB),
                        kernels_per_layer=kernels_per_layer, link_bandwidth=_scaled(link_gbs, GB),
                        link_latency_s=_scaled(link_us, 1e-6))
    models = [("--config", *target)] + ([("--draft-config", *draft)] if draft else [])
    for option, path, shape in models:
        if shape.heads % tp:
            raise click.BadParameter(f"{path}: tensor parallelism {tp} must divide its {shape.heads} attention heads",
                                     param_hint="--tp" if option == "--config" else option)
    if tp > 1 and device.link_bandwidth is None:
        raise click.BadParameter(f"{device.name} states no interconnect: give --link-gbs", param_hint="--tp")
    if out is not None:
        from specdec.cli.outputs import check_creatable

        if not str(out) or not out.parent.is_dir():
            raise click.BadParameter(f"no folder {str(out.parent)!r} to write into", param_hint="--out")
        check_creatable(out, "--out")
    fits = _check_fit([m[2] for m in models], fmt, device, tp, batch_sizes, contexts, max_k)
    if hardware == "measured":
        device = _measured(device, fmt, bandwidth_gbs, tflops, launch_us)
    report = _report(target, draft, fmt, device, hardware, tp, batch_sizes, max_k, contexts, fits)
    if not _finite_times(report["batch_timing"]):  # never a cost file of nulls
        raise SpecdecError("the model's times are not finite numbers with these overrides (--bandwidth-gbs, --tflops, "
                           "--launch-us): nothing was written")
    if out is not None:
        write_atomic(out, to_json(report, indent=1) + "\n")
    click.echo(to_json(report, indent=2) if as_json else _text(report, out))


def _finite_times(timing: Any) -> bool:
    tables = timing if isinstance(timing, list) else [timing]
    import math

    return all(math.isfinite(x) and x > 0 for t in tables for row in t["seconds"] for x in row)


def _scaled(value: float | None, unit: float) -> float | None:
    return None if value is None else value * unit


def _ram_bytes() -> float:
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _measured(device: Device, fmt: Dtype, bandwidth_gbs: float | None, tflops: float | None,
              launch_us: float | None) -> Device:
    """This machine's STREAM triad bandwidth, fp32 matrix-product rate (for every dtype) and
    per-operation floor, each unless overridden (`specdec.reference.estimate.limits`)."""
    from specdec.reference.estimate.limits import matmul_flops, op_seconds, triad_bandwidth

    return overridden(device, fmt, bandwidth=triad_bandwidth() if bandwidth_gbs is None else None,
                      flops=matmul_flops() if tflops is None else None,
                      launch_s=op_seconds() if launch_us is None else None)


def _check_fit(shapes: list[ModelShape], fmt: Dtype, device: Device, tp: int, batch_sizes: tuple[int, ...],
               contexts: tuple[int, ...], max_k: int) -> list[MemoryFit]:
    """The target's and the draft's memory per batch size at the longest context; refused (one
    line naming --batch-sizes, or --tp when not even the smallest batch fits) unless all fit."""
    def fit(b: int, tp: int) -> MemoryFit:
        parts = [memory_fit(s, fmt, device, tp, b, contexts[-1], max_k) for s in shapes]
        return MemoryFit(sum(p.weights for p in parts), sum(p.kv_cache for p in parts), parts[0].margin,
                         parts[0].available)

    fits = [fit(b, tp) for b in batch_sizes]
    bad = [(b, f) for b, f in zip(batch_sizes, fits) if not f.fits]
    if not bad:
        return fits
    b, f = bad[0]
    message = f"at context {contexts[-1]} + {max_k}: {f.message(b)}"
    if b > batch_sizes[0]:
        raise click.BadParameter(message, param_hint="--batch-sizes")
    more = [n for n in range(tp + 1, MAX_TP + 1) if all(s.heads % n == 0 for s in shapes) and fit(b, n).fits]
    raise click.BadParameter(message + (f"; --tp {more[0]} fits" if more else ""), param_hint="--tp")


def _report(target: Model, draft: Model | None, fmt: Dtype, device: Device, hardware: str, tp: int,
            batch_sizes: tuple[int, ...], max_k: int, contexts: tuple[int, ...], fits: list[MemoryFit]
            ) -> dict[str, Any]:
    """The cost file: kind specdec.estimate, source roofline; one batch_timing per context."""
    from specdec.costfiles import KIND_ESTIMATE

    b = [1, *batch_sizes]
    k = range(1, max_k + 1)

    def table(shape: ModelShape, ks: range) -> list:  # [contexts][1 + nB][K] seconds
        return [pass_seconds(shape, fmt, device, tp, [[x] for x in b], [list(ks)], n).tolist() for n in contexts]

    t = table(target[1], k)
    where = f"roofline {hardware} x{tp} {fmt.name}"
    timings = [{"context_tokens": n, "batch_sizes": list(batch_sizes), "seconds": rows[1:], "device": where}
               for n, rows in zip(contexts, t)]
    report = {"kind": KIND_ESTIMATE, "source": "roofline", "target": str(target[0]),
              "roofline": {"config": str(target[0]), "draft_config": str(draft[0]) if draft else None,
                           "dtype": fmt.name, "tp": tp, "hardware": hardware, "device": _device_dict(device),
                           "peak_flops": device.flops_for(fmt),
                           "model": asdict(target[1]), "parameters": target[1].resident_weights(1)},
              "verify_cost": [x / t[0][0][0] for x in t[0][0]],
              "cost": {"target_step_seconds": t[0][0][0], "verify_seconds": t[0][0]},
              "context_times": {"contexts": list(contexts), "seconds": [rows[0] for rows in t]},
              "batch_timing": timings[0] if len(timings) == 1 else timings,
              "memory": {"context_tokens": contexts[-1] + max_k, "batch_sizes": list(batch_sizes),
                         "needed_bytes": [f.needed for f in fits], "available_bytes": fits[0].available}}
    if draft:
        d = table(draft[1], range(1, 2))
        report["draft"] = {"config": str(draft[0]), "model": asdict(draft[1]),
                           "parameters": draft[1].resident_weights(1), "batch_sizes": list(batch_sizes),
                           "c": [[dr[0] / tr[0] for dr, tr in zip(dc[1:], tc[1:])] for dc, tc in zip(d, t)],
                           "step_seconds": [[row[0] for row in dc[1:]] for dc in d]}
    return report


def _device_dict(device: Device) -> dict[str, Any]:
    return {"name": device.name, "bandwidth_bytes_per_s": device.bandwidth, "peak_flops": dict(device.peak_flops),
            "memory_bytes": device.memory_bytes, "launch_s": device.launch_s,
            "kernels_per_layer": device.kernels_per_layer, "link_bytes_per_s": device.link_bandwidth,
            "link_latency_s": device.link_latency_s, "kv_bytes_per_s": device.kv_bandwidth,
            "verify_layer_s": device.verify_layer_s, "overlap": device.overlap}


def _text(report: dict[str, Any], out: Path | None) -> str:
    """The tables in milliseconds, the draft's c and the memory per batch size."""
    r = report["roofline"]
    dev = r["device"]
    lines = [f"roofline t(B, k) in ms: {r['config']} ({r['parameters'] / 1e9:.2f} B parameters), {r['dtype']}, "
             f"{dev['name']} x {r['tp']} ({dev['bandwidth_bytes_per_s'] / GB:.0f} GB/s, "
             f"{r['peak_flops'] / TERA:.1f} TFLOP/s, "
             f"{1e6 * dev['launch_s']:.1f} µs x {dev['kernels_per_layer']} kernels per layer"
             + (f", cache reads ≤ {dev['kv_bytes_per_s'] / GB:.0f} GB/s" if dev["kv_bytes_per_s"] else "")
             + (f", +{1e6 * dev['verify_layer_s']:.0f} µs a layer at k > 1" if dev["verify_layer_s"] else "") + ")"]
    timings = report["batch_timing"] if isinstance(report["batch_timing"], list) else [report["batch_timing"]]
    memory = report["memory"]
    for i, timing in enumerate(timings):
        ks = len(timing["seconds"][0])
        head = f"{'B':>5} " + " ".join(f"{'k=' + str(k):>8}" for k in range(1, ks + 1))
        head += f" {'c':>7}" if "draft" in report else ""
        lines += ["", f"context {timing['context_tokens']} tokens", head + f" {'GiB':>7}"]
        for j, (b, row) in enumerate(zip(timing["batch_sizes"], timing["seconds"])):
            c = f" {report['draft']['c'][i][j]:7.3f}" if "draft" in report else ""
            lines.append(f"{b:>5} " + " ".join(f"{1000 * s:8.3f}" for s in row) + c
                         + f" {memory['needed_bytes'][j] / GIB:7.1f}")
    lines.append(f"\nGiB: memory per device at {memory['context_tokens']} tokens (weights, KV cache, margin), "
                 f"{memory['available_bytes'] / GIB:.1f} GiB available")
    if out is not None:
        context = f" --context {timings[0]['context_tokens']}" if len(timings) > 1 else ""
        lines.append(f"wrote {out}: specdec plan --from METRICS --c C --batch-cost-file {out}{context}")
    return "\n".join(lines)
