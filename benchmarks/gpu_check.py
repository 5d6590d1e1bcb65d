"""The GPU regime's check (issue 54): t(B, k, L) of random-weight models of real shapes, timed
through the captured static decoder (`specdec.reference.model.static_decoder`), beside what
`specdec costs` predicts for the same shapes on that GPU's preset. Run by benchmarks/gpu_check.sh
(one device call); on the CPU with `--shapes tiny` it runs end to end in seconds
(tests/test_gpu_check.py), so the GPU's first minute is not spent on a typo.

    python benchmarks/gpu_check.py --out DIR [--shapes llama-3.2-1b,llama-3.1-8b,...] [--budget-s 420]

Writes DIR/gpu-raw.json as it goes (after every shape: what was measured survives a timeout),
then DIR/gpu-report.json and DIR/gpu-report.md (benchmarks/gpu_report.py, which reruns on the
raw file anywhere). Measured, per shape and cell: seconds per captured pass (median of 3 trials,
each the mean of enough replays to last ~20 ms, CUDA events); beside it the eager (uncaptured)
t(1, 1, L); once per run the GPU's device-to-device copy bandwidth and bf16 matrix-product rate;
a logits check of the captured pass against transformers' eager forward on a 2-layer model of
the first shape's widths.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

from specdec.reference.model.static_decoder import mean_seconds

HERE = Path(__file__).resolve().parent
SHAPES = HERE / "data" / "shapes"
sys.path.insert(0, str(HERE))


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def environment(device: str) -> dict:
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "torch": torch.__version__, "python": platform.python_version(), "host": platform.node(),
           "device": device}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env |= {"gpu": p.name, "gpu_memory_bytes": p.total_memory, "sm_count": p.multi_processor_count,
                "cuda": torch.version.cuda}
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True,
                                           timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            env["driver"] = f"unknown ({exc})"
    else:
        env["gpu"] = None
    return env


def ceilings(device: str, dtype: torch.dtype) -> dict:
    """Device-to-device copy bandwidth (bytes read + written / s) and the dtype's matrix-product
    rate (FLOP/s), best of 5 after warm-up: the measured ceilings t(1, 1) is held against."""
    cuda = device == "cuda"
    n = (1 << 30) if cuda else (1 << 24)  # bytes per buffer
    src = torch.empty(n // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    mean_seconds(lambda: dst.copy_(src), 3, cuda)
    copy = min(mean_seconds(lambda: dst.copy_(src), 5, cuda) for _ in range(3))
    m = 8192 if cuda else 512
    a = torch.randn(m, m, device=device, dtype=dtype)
    b = torch.randn(m, m, device=device, dtype=dtype)
    mean_seconds(lambda: a @ b, 3, cuda)
    mm = min(mean_seconds(lambda: a @ b, 5, cuda) for _ in range(3))
    del src, dst, a, b
    return {"copy_bytes_per_s": 2 * n / copy, "matmul_flops": 2 * m ** 3 / mm, "matmul_size": m,
            "kernel_floor_s": kernel_floor(device)}


def kernel_floor(device: str, kernels: int = 1000) -> float:
    """Seconds per kernel of a captured graph of `kernels` tiny dependent kernels (an in-place add
    on 1024 elements), replayed: the floor a captured pass pays per kernel (eager on the CPU)."""
    x = torch.zeros(1024, device=device)

    def chain() -> None:
        for _ in range(kernels):
            x.add_(1.0)

    if device != "cuda":
        return mean_seconds(chain, 3, False) / kernels
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain()
    mean_seconds(graph.replay, 3, True)
    return min(mean_seconds(graph.replay, 5, True) for _ in range(3)) / kernels


def kernel_profile(model, context: int, device: str) -> dict:
    """Kernels one eager B = 1, k = 1 pass launches on the GPU and the sum of their durations
    (torch.profiler): what a captured pass runs, without the gaps between launches."""
    from torch.profiler import ProfilerActivity, profile

    tokens = torch.zeros(1, 1, dtype=torch.long, device=device)
    model.step(tokens, context)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model.step(tokens, context)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"L": context, "kernels": len(kernels),
            "kernel_seconds": sum(e.device_time_total for e in kernels) / 1e6}


def logits_check(config: dict, device: str, dtype: torch.dtype) -> dict:
    """The captured pass against transformers' eager forward (attn_implementation="eager") on a
    2-layer model of `config`'s widths, random weights: 2 rows, a 24-token prefix prefilled
    (uncaptured), then a k = 4 verify pass (captured on CUDA) vs the eager forward's last 4 logits."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from specdec.reference.model.static_decoder import StaticDecoder

    small = dict(config, num_hidden_layers=2)
    hf_config = AutoConfig.for_model(**small)
    hf_config._attn_implementation = "eager"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=dtype).eval()
    tokens = torch.randint(0, small["vocab_size"], (2, 28), device=device)
    with torch.inference_mode():
        expected = model(tokens).logits[:, -4:].float()
        static = StaticDecoder.from_hf(model, 2, 32, fused=device == "cuda")
        static.prefill(tokens[:, :24])
        verify = tokens[:, 24:].clone()
        mask = static.mask(4, 24)
        if device == "cuda":
            graph = torch.cuda.CUDAGraph()
            static.step(verify, 24, mask)  # warm (same positions: rewrites the same entries)
            torch.cuda.synchronize()
            with torch.cuda.graph(graph):
                out = static.step(verify, 24, mask)
            graph.replay()
            torch.cuda.synchronize()
        else:
            out = static.step(verify, 24, mask)
        got = out.float()
    scale = expected.abs().max().item()
    return {"rows": 2, "prefix": 24, "k": 4, "dtype": str(dtype), "layers": 2, "attention": static.attention,
            "fused": static.ops != type(static.ops)(),
            "max_abs_diff": (got - expected).abs().max().item(), "logit_scale": scale,
            "top1_agreement": (got.argmax(-1) == expected.argmax(-1)).float().mean().item()}


def largest_batch(config: dict, batch_sizes: list[int], tokens: int, dtype: torch.dtype, device: str) -> int:
    """The largest batch size whose cache (at `tokens` per row) and the weights fit in 85 % of the
    device's free memory, with 4 GiB for activations and logits (every B on the CPU)."""
    if device != "cuda":
        return batch_sizes[-1]
    from specdec.reference.model.static_decoder import DecoderShape

    s = DecoderShape.of(config)
    size = torch.finfo(dtype).bits // 8
    weights = (s.weight_count + (0 if s.tied else s.vocab * s.hidden)) * size
    free = torch.cuda.mem_get_info()[0] * 0.85 - 4 * 2 ** 30 - weights
    per_row = 2 * s.layers * s.kv_heads * s.head_dim * tokens * size
    fitting = [b for b in batch_sizes if b * per_row <= free]
    return fitting[-1] if fitting else 0


def measure_shape(name: str, config: dict, args: argparse.Namespace, dtype: torch.dtype, deadline: float) -> dict:
    from specdec.reference.model.static_decoder import DecoderShape, Ops, StaticDecoder, time_step

    contexts, ks = ints(args.contexts), list(range(1, args.max_k + 1))
    top = largest_batch(config, ints(args.batch_sizes), contexts[-1] + args.max_k, dtype, args.device)
    sizes = [b for b in ints(args.batch_sizes) if b <= top]
    result = {"name": name, "config": config, "batch_sizes": sizes, "contexts": contexts, "max_k": args.max_k,
              "cells": [], "eager": [], "complete": False}
    if not sizes:
        result["skipped"] = "does not fit in the device's memory"
        return result
    gen = torch.Generator(device=args.device).manual_seed(0)
    started = time.perf_counter()
    model = StaticDecoder.random(DecoderShape.of(config), sizes[-1], contexts[-1] + args.max_k, dtype, args.device, gen,
                                 fused=args.device == "cuda" and not args.eager_ops)
    result |= {"build_seconds": time.perf_counter() - started, "attention": model.attention,
               "fused": model.ops != Ops()}
    if args.device == "cuda":
        try:
            result["profile"] = kernel_profile(model, contexts[0], args.device)
        except Exception:  # a diagnostic: the timings do not depend on it
            result["profile"] = {"error": traceback.format_exc(limit=3)}
    for context in contexts:
        for b in sizes:
            for k in ks:
                if time.time() > deadline:
                    result["stopped"] = f"budget reached at B={b}, k={k}, L={context}"
                    return result
                try:
                    cell = time_step(model, b, k, context, generator=gen, target_seconds=args.trial_s)
                except RuntimeError:  # the compiled pieces failed: go on with eager ones, and say so
                    if not result["fused"]:
                        raise
                    result |= {"fused": False, "fused_error": traceback.format_exc(limit=3), "cells": []}
                    model.ops = Ops()
                    cell = time_step(model, b, k, context, generator=gen, target_seconds=args.trial_s)
                result["cells"].append({"B": b, "k": k, "L": context, "seconds": cell.seconds,
                                        "spread": cell.spread, "captured": cell.captured})
        # eager beside captured: what launching every operation from Python costs at B = 1
        mask = model.mask(1, context)
        tokens = torch.zeros(1, 1, dtype=torch.long, device=args.device)
        mean_seconds(lambda: model.step(tokens, context, mask), 2, args.device == "cuda")
        result["eager"].append({"B": 1, "k": 1, "L": context,
                                "seconds": min(mean_seconds(lambda: model.step(tokens, context, mask), 5,
                                                      args.device == "cuda") for _ in range(3))})
    result["complete"] = True
    result["seconds_taken"] = time.perf_counter() - started
    del model
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return result


def modelled(name: str, config: dict, result: dict, hardware: str, out: Path) -> dict:
    """`specdec costs` for the measured batch sizes and contexts (the command line, as a user runs
    it); its JSON report, or the error it printed."""
    if not result["batch_sizes"]:
        return {"error": "nothing measured"}
    path = out / f"config-{name}.json"
    path.write_text(json.dumps(config))
    command = [sys.executable, "-m", "specdec", "costs", "--config", str(path), "--hardware", hardware,
               "--dtype", "bf16", "--batch-sizes", ",".join(map(str, result["batch_sizes"])),
               "--max-k", str(result["max_k"]), "--context", ",".join(map(str, result["contexts"])), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=out)  # not a checkout's specdec/
    path.unlink()
    if done.returncode:
        return {"error": done.stderr.strip()[-2000:], "command": " ".join(command[1:])}
    return {"command": "specdec " + " ".join(command[3:]), "report": json.loads(done.stdout)}


def preset_for(env: dict) -> str:
    gpu = (env.get("gpu") or "").upper()
    return "h200" if "H200" in gpu else "h100-pcie" if "H100" in gpu and "PCIE" in gpu else "h100-sxm"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default="llama-3.2-1b,llama-3.1-8b,qwen2.5-14b,qwen2.5-32b")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64")
    parser.add_argument("--max-k", type=int, default=8)
    parser.add_argument("--contexts", default="512,2048,4096")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--hardware", default=None, help="specdec costs --hardware (default: from the GPU's name)")
    parser.add_argument("--budget-s", type=float, default=360.0, help="stop timing new cells after this long")
    parser.add_argument("--eager-ops", action="store_true", help="do not compile the elementwise pieces")
    parser.add_argument("--trial-s", type=float, default=0.02, help="seconds one timing trial lasts")
    args = parser.parse_args()
    start = time.time()
    deadline = start + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    env = environment(args.device)
    hardware = args.hardware or preset_for(env)
    raw = {"kind": "specdec.gpu-check", "environment": env, "hardware": hardware, "dtype": args.dtype,
           "command": " ".join(sys.argv), "shapes": []}
    raw_path = args.out / "gpu-raw.json"

    def save() -> None:
        raw["wall_seconds"] = time.time() - start
        raw_path.write_text(json.dumps(raw, indent=1))

    torch.backends.cuda.matmul.allow_tf32 = False
    for name in ("recompile_limit", "cache_size_limit"):  # one compile per shape family of B, k, L: allow many
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)
    raw["ceilings"] = ceilings(args.device, dtype)
    print(f"[gpu-check] {env.get('gpu') or 'cpu'} torch {env['torch']}: copy "
          f"{raw['ceilings']['copy_bytes_per_s'] / 1e12:.2f} TB/s, matmul {raw['ceilings']['matmul_flops'] / 1e12:.0f} "
          f"TFLOP/s, {1e6 * raw['ceilings']['kernel_floor_s']:.2f} µs per captured kernel", flush=True)
    names = args.shapes.split(",")
    try:
        first = json.loads(Path(SHAPES / f"{names[0]}.json").read_text())
        raw["logits_check"] = logits_check(first, args.device, dtype)
    except Exception:  # a report of its own: the timings below do not depend on it
        raw["logits_check"] = {"error": traceback.format_exc(limit=4)}
    print(f"[gpu-check] logits check: {raw['logits_check']}", flush=True)
    save()
    for name in names:
        config = json.loads((SHAPES / f"{name}.json").read_text())
        result = measure_shape(name, config, args, dtype, deadline)
        result["modelled"] = modelled(name, config, result, hardware, args.out)
        raw["shapes"].append(result)
        save()
        print(f"[gpu-check] {name}: {len(result['cells'])} cells in {time.time() - start:.0f} s"
              + (f" ({result.get('stopped') or result.get('skipped')})" if not result["complete"] else ""), flush=True)
        if time.time() > deadline:
            break
    save()
    from gpu_report import write_report

    write_report(raw, args.out)
    print((args.out / "gpu-report.md").read_text())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
