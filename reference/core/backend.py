"""Target backends: `eager` (PyTorch's own kernels) or `fast` (a small custom GEMM kernel for
the verify pass, compiled once and cached). Same fp32 weights, same model: only the matrix
products over 1..16 rows change, so logits agree with eager up to floating-point order.
Measurements and the reasons: docs/fast-backend.md.
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
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
    return load(name="specdec_small_gemm", sources=[str(SOURCE)], extra_cflags=FLAGS, build_directory=str(build),
                verbose=False)


class FastLinear(torch.nn.Module):
    """A Linear layer whose inputs of at most MAX_ROWS rows use the packed-weight kernel.

    weight / bias stay the original tensors (tied weights stay tied); `packed` is the
    kernel's copy of the weight, [ceil(out / 16), in, 16].
    """

    def __init__(self, linear: torch.nn.Module) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.out_features = int(linear.weight.shape[0])
        self.register_buffer("packed", kernel().pack(linear.weight.detach().float().contiguous()), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] > MAX_ROWS or x.dtype != torch.float32 or x.device.type != "cpu":
            return F.linear(x, self.weight, self.bias)
        y = kernel().small_linear(rows, self.packed, self.out_features)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


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


def vector_isa() -> str:
    """The CPU's widest vector instruction set as PyTorch sees it ("AVX512", "AVX2", "DEFAULT", ...)."""
    return torch.backends.cpu.get_cpu_capability()


def use_backend(model: torch.nn.Module, backend: str) -> str:
    """Switch `model` to `backend` in place; returns the backend in use.

    "auto" is "fast" where it is available (CPU, float32, kernel built) and the CPU has AVX-512,
    else "eager": the kernel keeps 16-float vectors in registers, which AVX-512 has and AVX2
    has not (there it spills and ran 20-35x slower than eager at 4-16 rows: docs/fast-backend.md).
    """
    if backend not in BACKENDS:
        raise SpecdecError(f"unknown target backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "eager" or (backend == "auto" and vector_isa() != "AVX512"):
        return "eager"
    reason = available(model)
    if reason is not None:
        if backend == "fast":
            raise SpecdecError(reason)
        return "eager"
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, FastLinear(child))
    return "fast"
