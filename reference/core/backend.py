"""Target backends: `eager` (PyTorch's own kernels) or `fast` (a small custom GEMM kernel for
the verify pass, compiled once per instruction set and cached, its register tiling chosen by
the vector width: kernels/small_gemm.cpp), and `auto`: whichever a short measurement on this
CPU found faster (recorded). Same fp32 weights, same model: only the matrix
products over 1..16 rows change, so logits agree with eager up to floating-point order.
Measurements and the reasons: docs/fast-backend.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import time
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec.errors import SpecdecError
from specdec.paths import cache_dir

BACKENDS = ("eager", "fast", "auto")
MAX_ROWS = 16  # the kernel's largest row count; longer inputs (prefill) use F.linear
SOURCE = Path(__file__).with_name("kernels") / "small_gemm.cpp"
FLAGS = ["-O3", "-march=native"]  # a build runs only on CPUs with its instruction set: see build_dir
# at::parallel_for is inline OpenMP: without -fopenmp the kernel ran on one thread. The library
# it links is libgomp.so.1, the one torch ships and has already loaded (one thread pool).
OPENMP = ["-fopenmp"]


@lru_cache(maxsize=1)
def native_isa() -> str:
    """What `-march=native` means on this CPU, as the C++ compiler torch builds with resolves
    it: its `-march=` value and every target option it enables, one a line (sorted). A
    compiler that cannot list them (not GCC, or none) gives the CPU's flags instead."""
    compiler = os.environ.get("CXX", "c++")  # what torch.utils.cpp_extension runs
    try:
        listing = subprocess.run([compiler, "-march=native", "-Q", "--help=target"], capture_output=True,
                                 text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        listing = ""
    fields = [line.split() for line in listing.splitlines()]
    lines = sorted(" ".join(f) for f in fields if f and (f[0] == "-march=" or f[-1] == "[enabled]"))
    return "\n".join(lines) if any(line.startswith("-march= ") for line in lines) else _cpu_flags()


def _cpu_flags() -> str:
    """The machine name and the CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.is_file() else ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "\n".join([f"machine {platform.machine()}", *sorted(flags)])


def isa_key(description: str) -> str:
    """A folder-name key for an ISA description (`native_isa`): the `-march` name and a hash
    of the whole description, e.g. "znver2-3f9a1c0b2d"."""
    march = next((line.split()[1] for line in description.splitlines() if line.startswith("-march= ")), "cpu")
    return f"{march}-{hashlib.sha1(description.encode()).hexdigest()[:10]}"


def build_dir(description: str | None = None) -> Path:
    """Where the kernel is built and cached: one folder per torch version and instruction set,
    so a build made for another CPU (an AVX-512 one here on AVX2 dies with SIGILL) is
    rebuilt, never loaded. description: an ISA description (default: this CPU's)."""
    key = isa_key(native_isa() if description is None else description)
    return cache_dir() / "torch_extensions" / f"small_gemm-{torch.__version__}-{key}"


@lru_cache(maxsize=1)
def kernel():
    """The compiled extension (built on first use, about 40 s, then loaded from the cache)."""
    from torch.utils.cpp_extension import load

    build = build_dir()
    build.mkdir(parents=True, exist_ok=True)
    return load(name="specdec_small_gemm", sources=[str(SOURCE)], extra_cflags=FLAGS + OPENMP,
                extra_ldflags=OPENMP, build_directory=str(build),
                verbose=False)


class FastLinear(torch.nn.Module):
    """A Linear layer whose inputs of at most MAX_ROWS rows use the packed-weight kernel.

    weight / bias stay the original tensors (tied weights stay tied); `packed` is the
    kernel's copy of the weight, [ceil(out / W), in, W] (W: the build's floats per vector).
    bf16: pack the weight in bfloat16 (half the bytes streamed; a feature draft's, never the
    target's) and round `weight` itself to the same values, so the rows above MAX_ROWS
    (F.linear) multiply by the same numbers as the kernel.
    """

    def __init__(self, linear: torch.nn.Module, bf16: bool = False) -> None:
        super().__init__()
        if bf16:
            with torch.no_grad():
                linear.weight.copy_(linear.weight.to(torch.bfloat16).float())
        self.weight = linear.weight
        self.bias = linear.bias
        self.out_features = int(linear.weight.shape[0])
        self.register_buffer("packed", kernel().pack(linear.weight.detach().float().contiguous(), bf16),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not 0 < x.numel() <= MAX_ROWS * x.shape[-1] or x.dtype != torch.float32 or x.device.type != "cpu":
            return F.linear(x, self.weight, self.bias)
        y = kernel().small_linear(x, self.packed, self.out_features)  # x [..., in]: shapes kept in C++
        return y if self.bias is None else y + self.bias


def available(model: torch.nn.Module) -> str | None:
    """None if the fast backend can run this model, else why not (one line)."""
    if next(model.parameters()).device.type != "cpu":
        return "the fast backend is a CPU kernel (the model is not on the CPU)"
    if next(model.parameters()).dtype != torch.float32:
        return "the fast backend runs float32 models only"
    try:
        kernel()
    except Exception as exc:  # no compiler, no ninja, unsupported platform
        detail = str(exc).splitlines()[0] if str(exc) else ""
        return f"the fast kernel could not be built: {type(exc).__name__}: {detail}"
    return None


AUTO_RECORD = "auto.json"  # the measured choice for `auto`, beside the kernel's build
PROBE_SHAPE = (4096, 2048)  # a 32 MB weight: past the caches, as a model's weights are
PROBE_ROWS = (1, 4)  # the one-token step and a short verify pass


def measured_choice() -> dict:
    """What `auto` runs on this CPU: "fast" if the kernel takes no longer than eager's F.linear on
    a weight past the caches for 1 and 4 rows together (best of 7 calls each: the one-token step
    and a short verify pass), else "eager". Measured once
    (at set-up, or on first use) and recorded in the kernel's build folder (one per instruction
    set and torch version), so every later command reads the same choice."""
    path = build_dir() / AUTO_RECORD
    source = build_hash()  # a changed kernel or build is measured again
    try:
        record = json.loads(path.read_text())
        if record.get("choice") in ("fast", "eager") and record.get("source") == source:
            return record
    except (OSError, ValueError):
        pass
    generator = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(PROBE_SHAPE[1], PROBE_SHAPE[0], bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(PROBE_SHAPE, generator=generator))
        fast = FastLinear(linear)
        seconds = {"eager": {}, "fast": {}}
        for rows in PROBE_ROWS:
            x = torch.randn(rows, PROBE_SHAPE[1], generator=generator)
            for name, f in (("eager", lambda z: F.linear(z, linear.weight)), ("fast", fast)):
                seconds[name][str(rows)] = _best_seconds(f, x)
    faster = sum(seconds["fast"].values()) <= sum(seconds["eager"].values())
    record = {"choice": "fast" if faster else "eager", "source": source, "seconds": seconds, "shape": list(PROBE_SHAPE),
              "lanes": int(kernel().lanes()), "isa": vector_isa(), "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{AUTO_RECORD}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return record


def build_hash() -> str:
    """The kernel's source and its compiler flags, hashed: what `measured_choice` measured."""
    return hashlib.sha1(SOURCE.read_bytes() + " ".join(FLAGS + OPENMP).encode()).hexdigest()[:10]


def _best_seconds(f, x: torch.Tensor, calls: int = 7) -> float:
    f(x)  # first call: allocations
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        f(x)
        best = min(best, time.perf_counter() - start)
    return best


def vector_isa() -> str:
    """The CPU's widest vector instruction set as PyTorch sees it ("AVX512", "AVX2", "DEFAULT", ...)."""
    return torch.backends.cpu.get_cpu_capability()


def use_backend(model: torch.nn.Module, backend: str) -> str:
    """Switch `model` to `backend` in place; returns the backend in use.

    "auto" is "fast" where it is available (CPU, float32, kernel built) and this CPU's recorded
    measurement chose it (`measured_choice`), else "eager".
    """
    if backend not in BACKENDS:
        raise SpecdecError(f"unknown target backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "eager":
        return "eager"
    reason = available(model)
    if reason is not None:
        if backend == "fast":
            raise SpecdecError(reason)
        return "eager"
    if backend == "auto" and measured_choice()["choice"] != "fast":
        return "eager"
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, FastLinear(child))
    return "fast"
