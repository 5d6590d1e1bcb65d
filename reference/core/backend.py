"""Target backends: `eager` (PyTorch's own kernels) or `fast` (a small custom GEMM kernel for
the verify pass, compiled once and cached). Same fp32 weights, same model: only the matrix
products over 1..16 rows change, so logits agree with eager up to floating-point order.
Measurements and the reasons: docs/fast-backend.md.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec.paths import CACHE_DIR

BACKENDS = ("eager", "fast", "auto")
MAX_ROWS = 16  # the kernel's largest row count; longer inputs (prefill) use F.linear
SOURCE = Path(__file__).with_name("kernels") / "small_gemm.cpp"


@lru_cache(maxsize=1)
def kernel():
    """The compiled extension (built on first use, about 40 s, then loaded from the cache)."""
    from torch.utils.cpp_extension import load

    build = CACHE_DIR / "torch_extensions" / f"small_gemm-{torch.__version__}"
    build.mkdir(parents=True, exist_ok=True)
    flags = ["-O3", "-march=native"]
    return load(name="specdec_small_gemm", sources=[str(SOURCE)], extra_cflags=flags, build_directory=str(build),
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
        raise ValueError(f"unknown target backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "eager" or (backend == "auto" and vector_isa() != "AVX512"):
        return "eager"
    reason = available(model)
    if reason is not None:
        if backend == "fast":
            raise ValueError(reason)
        return "eager"
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, FastLinear(child))
    return "fast"
