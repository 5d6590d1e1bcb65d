"""Target backends: `eager` (PyTorch's own kernels) or `fast` (the extension's packed-weight GEMM
and short ops for the verify pass, compiled once per instruction set and cached:
kernel_build.py; the model's parts replaced: fast_modules.py), and `auto`: whichever a short
measurement on this CPU found faster (recorded). Same fp32 weights, same model: only how passes
over 1..16 tokens compute changes, so logits agree with eager up to floating-point order.
Measurements and the reasons: docs/fast-backend.md.
"""
from __future__ import annotations

import json
import os
import time

import torch
import torch.nn.functional as F

from specdec.errors import SpecdecError
from specdec.reference.core.fast_modules import PARTS, FastLinear, install
from specdec.reference.core.kernel_build import build_dir, build_hash, kernel

BACKENDS = ("eager", "fast", "auto")


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


def use_backend(model: torch.nn.Module, backend: str, parts: tuple[str, ...] = PARTS, tiling: str = "native") -> str:
    """Switch `model` to `backend` in place; returns the backend in use.

    "auto" is "fast" where it is available (CPU, float32, kernel built) and this CPU's recorded
    measurement chose it (`measured_choice`), else "eager". parts: which of the model's parts the
    fast backend replaces (fast_modules.PARTS; benchmarks measure each); tiling: the kernel's
    ("avx2": the 8-float tiling even on an AVX-512 CPU, for benchmarks).
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
    install(model, parts, tiling)
    return "fast"
