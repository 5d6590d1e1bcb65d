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

from specdec.errors import SpecdecError
from specdec.reference.model.fast_modules import PARTS, install
from specdec.reference.model.kernel_build import build_dir, build_hash, kernel

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
# the probe: a Llama of the default target's layer shapes (SmolLM2-135M: width 576, MLP 1536, 9 heads
# over 3 KV heads) with 8 layers and an 8,192-token output (130 MB of weights: past the caches)
PROBE_CONFIG = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=9,
                    num_key_value_heads=3, vocab_size=8192)
PROBE_ROWS = (1, 4)  # the one-token step and a short verify pass
PROBE_CONTEXT = 64  # tokens of KV cache


def measured_choice() -> dict:
    """What `auto` runs on this CPU: "fast" if the fast backend's passes over 1 and 4 tokens
    together take no longer than eager's, timed on a whole model of the default target's layer
    shapes (`PROBE_CONFIG`, random weights; best of 7 passes each). Measured once (at set-up, or
    on first use) and recorded in the kernel's build folder (one per instruction set and torch
    version), so every later command reads the same choice.

    Why a model and not one product: the kernel's gain is in the whole pass (the fused short ops
    and the packed products of a narrow model); on one 4096 x 2048 product it was as fast as
    F.linear (1.98 against 1.94 ms, quiet) and the choice followed the noise: a main job whose
    set-up ran beside a compile picked eager and decoded 2.2x slower (2026-11-26)."""
    path = build_dir() / AUTO_RECORD
    source = build_hash()  # a changed kernel or build is measured again
    try:
        record = json.loads(path.read_text())
        if record.get("choice") in ("fast", "eager") and record.get("source") == source \
                and record.get("probe") == PROBE_CONFIG:  # an older probe's record is measured again
            return record
    except (OSError, ValueError):
        pass
    seconds = {name: _pass_seconds(name) for name in ("eager", "fast")}
    faster = sum(seconds["fast"].values()) <= sum(seconds["eager"].values())
    record = {"choice": "fast" if faster else "eager", "source": source, "seconds": seconds, "probe": PROBE_CONFIG,
              "lanes": int(kernel().lanes()), "isa": vector_isa(), "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{AUTO_RECORD}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return record


@torch.inference_mode()
def _pass_seconds(backend: str, calls: int = 7) -> dict[str, float]:
    """Best seconds of the probe model's pass over k tokens (k in PROBE_ROWS) at PROBE_CONTEXT
    tokens of KV cache, on `backend` ("eager" or "fast")."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specdec.reference.model.seq2seq import ModelPass, new_cache, with_cache

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**PROBE_CONFIG, max_position_embeddings=256)).eval()
    if backend == "fast":
        install(model, PARTS)
    tokens = [1 + i % (PROBE_CONFIG["vocab_size"] - 1) for i in range(PROBE_CONTEXT + max(PROBE_ROWS))]
    ids = torch.tensor([tokens])
    run, cache = ModelPass(model, [tokens]), new_cache(model)
    run(ids[:, :PROBE_CONTEXT], 1, **with_cache(model, cache))
    out = {}
    for k in PROBE_ROWS:
        x = ids[:, PROBE_CONTEXT:PROBE_CONTEXT + k]
        best = float("inf")
        for _ in range(calls + 1):  # the first: allocations
            start = time.perf_counter()
            run(x, k, **with_cache(model, cache))
            best = min(best, time.perf_counter() - start)
            cache.crop(-k)
        out[str(k)] = best
    return out


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
