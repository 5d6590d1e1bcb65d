"""The hardware's floor under a verify pass: how fast can t(k) be on this machine?

A pass over k tokens must read every weight once (memory bound) and do 2 k FLOPs per
matrix weight (compute bound), so t_min(k) = max(weight bytes / bandwidth, 2 k matrix
weights / peak FLOP rate). Bandwidth is a STREAM-style triad (a = b + s c over arrays far
larger than the caches); the FLOP rate the better of a large fp32 matrix product and the
fast kernel's 16-row product on a weight in cache (MKL takes its AVX2 path on AMD CPUs: 220
GFLOP/s against the kernel's 450 on a 2-core AVX-512 EPYC, 2026-11-25; measuring the kernel
builds it where it is not yet built). Both use the threads torch uses. Measured once per run;
docs/fast-backend.md discusses the numbers. `specdec costs
--hardware measured` takes both, and the per-operation floor (`op_seconds`), into the roofline
model (docs/roofline.md).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from specdec.reference.estimate.cost import flops_per_token


@dataclass(frozen=True)
class HardwareLimits:
    bandwidth: float  # bytes per second, STREAM triad (3 arrays of `array_bytes` each)
    flops: float  # fp32 FLOP per second: the better of a square matrix product and the fast kernel's
    weight_bytes: int  # bytes of the target's parameters (tied weights once)
    matrix_flops_per_token: float  # 2 x matrix weights (specdec.reference.estimate.cost.flops_per_token)
    threads: int

    def min_seconds(self, k: int) -> float:
        """The lowest possible time of one pass over k tokens (ignoring attention and caches)."""
        return max(self.weight_bytes / self.bandwidth, k * self.matrix_flops_per_token / self.flops)

    def to_dict(self, max_k: int = 16) -> dict[str, Any]:
        d = asdict(self)
        d["min_seconds"] = [self.min_seconds(k) for k in range(1, max_k + 1)]
        return d


def triad_bandwidth(array_bytes: int = 128 * 2**20, repeats: int = 8) -> float:
    """Best-of-repeats STREAM triad bandwidth in bytes per second (reads b, c; writes a)."""
    n = array_bytes // 4
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    return 3 * 4 * n / best_seconds(lambda: torch.add(b, c, alpha=3.0, out=a), repeats)


def best_seconds(f, repeats: int, calls: int = 1) -> float:
    """The least seconds `calls` calls of f() took over repeats + 1 tries (the first warms up)."""
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_flops(size: int = 1536, repeats: int = 5) -> float:
    """Best-of-repeats fp32 FLOP rate of a size x size matrix product."""
    x, y = torch.rand(size, size), torch.rand(size, size)
    return 2 * size**3 / best_seconds(lambda: torch.mm(x, y), repeats)


def kernel_flops(repeats: int = 5, calls: int = 50) -> float:
    """Best-of-repeats fp32 FLOP rate of the fast kernel: 16 rows times a 1536 x 576 weight (3.5 MB,
    in cache after the first call), or 0.0 where the kernel cannot be built."""
    try:
        from specdec.reference.model.kernel_build import kernel

        ops = kernel()
    except Exception:  # no compiler, no ninja: no kernel to measure
        return 0.0
    packed, x = ops.pack(torch.rand(1536, 576), False), torch.rand(16, 576)
    return 2 * 16 * 1536 * 576 * calls / best_seconds(lambda: ops.small_linear(x, packed, 1536), repeats, calls)


def op_seconds(calls: int = 2000, repeats: int = 5) -> float:
    """Best-of-repeats seconds per call of a tiny operation (an add of two 1-element tensors) from
    Python: the floor every eager operation pays whatever its size."""
    x = torch.zeros(1)
    return best_seconds(lambda: torch.add(x, x), repeats, calls) / calls


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters, each tensor once (tied embeddings are not doubled)."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[p.data_ptr()] = p.numel() * p.element_size()
    return int(sum(seen.values()))


def measure_limits(model: torch.nn.Module) -> HardwareLimits:
    return HardwareLimits(triad_bandwidth(), max(matmul_flops(), kernel_flops()), weight_bytes(model),
                          flops_per_token(model), torch.get_num_threads())
