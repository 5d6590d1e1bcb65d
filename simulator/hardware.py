"""What the roofline model (`specdec.simulator.roofline`) needs to know about a device and a
dtype, and named presets with the devices' public specifications (dense peaks, never the
2:4-sparsity figures; sources in docs/roofline.md).

Pure values, no I/O. The `measured` device (this machine's STREAM triad bandwidth and fp32
matrix-product rate) needs torch and is built by the command line (`specdec costs`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from specdec.errors import SpecdecError

GB = 1e9  # vendors' bandwidths and capacities are decimal
TERA = 1e12

# The GPU presets hold the datasheets' numbers times what a GPU of this workplace reached
# (benchmarks/gpu_check.py on an H200, 2026-11-26; docs/roofline.md, "The GPU regime"):
# - measured: a device-to-device copy moves 0.885 of the datasheet bandwidth (4.21-4.25 of 4.8
#   TB/s; an H100 of the same workplace 3.0 of 3.35: 0.90) and an 8192^3 bf16 matrix product runs
#   at 0.80 of the dense peak (785-800 of 989 TFLOP/s; the H100: 798); assumed alike for every preset.
# - fitted on the captured passes of two shapes (llama-3.2-1b, qwen2.5-14b; llama-3.1-8b and
#   qwen2.5-32b, and the H100's every shape, held out; H200 run 4): the floor per kernel, with 12
#   kernels per layer (assumed: a CUDA-graph engine with fused norms); the rate the cache reads
#   reach on a GH100 die (H100 and H200 alike: the same 132 SMs, which cap FlashAttention's
#   split-KV reads near 3 TB/s — the H100 copies at 3.0, the H200 at 4.2); and the time a layer
#   adds when a pass verifies k > 1 tokens a row (the multi-token attention path: in the captured
#   decoder a FlashAttention pass over the cache, one over the new keys and their merge). Other
#   GPUs' cache reads: assumed at the copy bandwidth.
GPU_BANDWIDTH_SHARE = 0.885
GPU_FLOPS_SHARE = 0.80
GPU_LAUNCH_S = 3.6e-6
GPU_KERNELS_PER_LAYER = 12
GH100_KV_BYTES_PER_S = 2.98e12
GPU_VERIFY_LAYER_S = 23e-6
NVLINK_LATENCY_S = 8e-6  # one all-reduce's fixed cost over NVLink / NVSwitch (assumption)
PCIE_LATENCY_S = 15e-6  # ... over PCIe (assumption)
# The `measured` device runs specdec's own decoder: one scored pass through transformers' eager
# forward dispatches this many operations per Llama decoder layer (SmolLM2-135M, counted with a
# TorchDispatchMode by benchmarks/bench_roofline.py).
EAGER_KERNELS_PER_LAYER = 184


@dataclass(frozen=True)
class Dtype:
    """How many bytes a weight, an activation and a cached key/value take, and whose peak rate the
    matrix products run at (a weight-only format computes in bf16)."""

    name: str
    weight_bytes: float  # bytes per weight (int4: 0.5)
    act_bytes: float  # bytes per activation, KV-cache entry and logit
    compute: str  # key into Device.peak_flops ("fp32", "bf16", "fp8", "int8")


DTYPES: dict[str, Dtype] = {
    "fp32": Dtype("fp32", 4, 4, "fp32"),  # plain fp32 GEMMs (PyTorch's default: no TF32)
    "bf16": Dtype("bf16", 2, 2, "bf16"),
    "fp16": Dtype("fp16", 2, 2, "bf16"),  # same tensor-core rate as bf16 (fp32 accumulation)
    "fp8": Dtype("fp8", 1, 2, "fp8"),  # W8A8 where the device has fp8, else weight-only
    "int8": Dtype("int8", 1, 2, "int8"),  # W8A8 where the device has int8 tensor cores
    "int4": Dtype("int4", 0.5, 2, "bf16"),  # weight-only (GPTQ/AWQ kernels dequantize to bf16)
}


@dataclass(frozen=True)
class Device:
    """One accelerator (tensor parallelism uses tp of them) as the roofline sees it."""

    name: str
    bandwidth: float  # memory bandwidth, bytes/s
    peak_flops: Mapping[str, float] = field(repr=False)  # dense FLOP/s by compute dtype ("fp32", "bf16", ...)
    memory_bytes: float  # memory capacity, bytes
    launch_s: float  # floor per kernel, seconds (launch and gap)
    kernels_per_layer: int  # kernels one decoder layer launches
    link_bandwidth: float | None  # per-direction bytes/s to each peer for all-reduce; None: no link
    link_latency_s: float  # fixed cost of one all-reduce, seconds
    kv_bandwidth: float | None = None  # bytes/s attention's KV-cache reads reach at most (None: `bandwidth`)
    verify_layer_s: float = 0.0  # seconds a layer adds when a pass verifies k > 1 tokens a row
    overlap: bool = True  # True: a group's time is max(bytes / bandwidth, FLOPs / peak); False: their sum

    def flops_for(self, dtype: Dtype) -> float:
        """Peak FLOP/s for the dtype's matrix products: its own rate, else bf16's (a weight-only
        format on a device without that unit), else fp32's (a CPU)."""
        for key in (dtype.compute, "bf16", "fp32"):
            if key in self.peak_flops:
                return self.peak_flops[key]
        raise SpecdecError(f"{self.name} states no peak FLOP rate for {dtype.name}")


def _gpu(name: str, tb_s: float, gb: float, link_gb_s: float, latency_s: float, kv_bytes_s: float | None = None,
         **tflops: float) -> Device:
    """A preset from its datasheet (dense peaks): bandwidth and peaks scaled by the shares reached
    here, the fitted floor and verify term, `kv_bytes_s` the cache reads' cap (None: the copy
    bandwidth), memory and compute not overlapping within a group (the H200's passes between 16
    and 512 tokens add the two; docs/roofline.md)."""
    return Device(name, tb_s * TERA * GPU_BANDWIDTH_SHARE, {k: v * TERA * GPU_FLOPS_SHARE for k, v in tflops.items()},
                  gb * GB, GPU_LAUNCH_S, GPU_KERNELS_PER_LAYER, link_gb_s * GB, latency_s, kv_bytes_s,
                  GPU_VERIFY_LAYER_S, False)


# Datasheet numbers (`_gpu` scales them). Link bandwidths are per direction (NVLink's quoted totals
# are both directions: 900 GB/s -> 450).
PRESETS: dict[str, Device] = {
    "h100-sxm": _gpu("H100 SXM 80GB", 3.35, 80, 450, NVLINK_LATENCY_S, GH100_KV_BYTES_PER_S, fp32=67, bf16=989, fp8=1979, int8=1979),
    "h100-pcie": _gpu("H100 PCIe 80GB", 2.0, 80, 64, PCIE_LATENCY_S, GH100_KV_BYTES_PER_S, fp32=51, bf16=756, fp8=1513, int8=1513),
    "h200": _gpu("H200 SXM 141GB", 4.8, 141, 450, NVLINK_LATENCY_S, GH100_KV_BYTES_PER_S, fp32=67, bf16=989, fp8=1979, int8=1979),
    "a100-80gb": _gpu("A100 80GB SXM", 2.039, 80, 300, NVLINK_LATENCY_S, fp32=19.5, bf16=312, int8=624),
    "a100-40gb": _gpu("A100 40GB SXM", 1.555, 40, 300, NVLINK_LATENCY_S, fp32=19.5, bf16=312, int8=624),
    "l40s": _gpu("L40S 48GB", 0.864, 48, 32, PCIE_LATENCY_S, fp32=91.6, bf16=362, fp8=733, int8=733),
    "l4": _gpu("L4 24GB", 0.300, 24, 32, PCIE_LATENCY_S, fp32=30.3, bf16=121, fp8=242.5, int8=242.5),
    "a10g": _gpu("A10G 24GB", 0.600, 24, 32, PCIE_LATENCY_S, fp32=35, bf16=70),
    "rtx4090": _gpu("RTX 4090 24GB", 1.008, 24, 32, PCIE_LATENCY_S, fp32=82.6, bf16=165.2, fp8=330.3, int8=660.6),
}


def overridden(device: Device, dtype: Dtype, bandwidth: float | None = None, flops: float | None = None,
               launch_s: float | None = None, memory_bytes: float | None = None,
               kernels_per_layer: int | None = None, link_bandwidth: float | None = None,
               link_latency_s: float | None = None) -> Device:
    """The device with the given fields replaced (None keeps one); `flops` is the peak of the
    unit `dtype` computes on."""
    peaks = dict(device.peak_flops) if flops is None else {**device.peak_flops, dtype.compute: flops}
    changes = {"bandwidth": bandwidth, "launch_s": launch_s, "memory_bytes": memory_bytes,
               "kernels_per_layer": kernels_per_layer, "link_bandwidth": link_bandwidth,
               "link_latency_s": link_latency_s}
    return replace(device, peak_flops=peaks, **{k: v for k, v in changes.items() if v is not None})
