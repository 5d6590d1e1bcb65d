"""The fast backend's parts of a model (docs/fast-backend.md): each replaces one kind of module,
computes what it computed (same weights; outputs equal up to floating-point order) and calls the
extension (`kernel_build.kernel`) for CPU float32 inputs of at most MAX_ROWS rows, PyTorch
otherwise.

- "linear": every nn.Linear -> FastLinear (the packed-weight GEMM);
- "mlp": a gate/up/down SiLU MLP (Llama's) -> FastMLP: gate and up in one call that writes
  silu(gate) * up, then the down projection;
- "norm": an RMSNorm with `weight` and `variance_epsilon` (Llama's) -> FastRMSNorm, one call;
- "attention": the model's SDPA attention -> `short_attention` (registered with transformers as
  the attention implementation ATTENTION) for up to MAX_ROWS query rows: grouped-query attention
  over the cache without repeating its keys and values; only for the model types of
  ATTENTION_MODELS (their code reaches attention through transformers' interface and never asks
  whether the implementation is named "sdpa": Falcon does, and would then build other masks).

A module is replaced only where the replacement reproduced it on random inputs at two scales
(`_same`), so a model whose MLP or norm differs (a bias, Gemma's 1 + weight, a clamped SwiGLU, a
gated norm) keeps its own. Where autograd would need a graph (grad enabled and an input or weight
requiring grad) every part runs PyTorch's ops: the extension's outputs have no gradient. The packed
copies are made at replacement: load new weights before `use_backend`, not after.
"""
from __future__ import annotations

import inspect
from functools import partial

import torch
import torch.nn.functional as F

from specdec.reference.model.kernel_build import kernel

MAX_ROWS = 16  # the kernel's largest row count; longer inputs (prefill) use PyTorch
PARTS = ("linear", "mlp", "norm", "attention")
HEAD_DIMS = (64, 128)  # the head sizes short_attention is compiled for
# model types whose modelling code (transformers 5.24, read) calls attention through the interface and has
# no branch on the implementation's name
ATTENTION_MODELS = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "phi3", "gemma", "gemma2",
                              "olmo", "starcoder2", "smollm3", "granite", "gpt2", "t5", "bart", "marian", "whisper"})
ATTENTION = "specdec_short"


def _kernel_input(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether x [..., in] goes to the kernel: CPU float32, 1..MAX_ROWS rows, and no autograd graph wanted."""
    return (0 < x.numel() <= MAX_ROWS * x.shape[-1] and x.dtype == torch.float32 and x.device.type == "cpu"
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)))


class FastLinear(torch.nn.Module):
    """A Linear layer whose inputs of at most MAX_ROWS rows use the packed-weight kernel.

    weight / bias stay the original tensors (tied weights stay tied); `packed` is the
    kernel's copy of the weight, [groups, in, G W] (W: the build's floats per vector).
    bf16: pack the weight in bfloat16 (half the bytes streamed; a feature draft's, never the
    target's) and round `weight` itself to the same values, so the rows above MAX_ROWS
    (F.linear) multiply by the same numbers as the kernel.
    """

    def __init__(self, linear: torch.nn.Module, bf16: bool = False, tiling: str = "native") -> None:
        super().__init__()
        if bf16:
            with torch.no_grad():
                linear.weight.copy_(linear.weight.to(torch.bfloat16).float())
        self.weight = linear.weight
        self.bias = linear.bias
        self.tiling = tiling
        self.out_features = int(linear.weight.shape[0])
        self.register_buffer("packed", kernel(tiling).pack(linear.weight.detach().float().contiguous(), bf16),
                             persistent=False)

    def streamed_instead(self) -> list[torch.Tensor]:
        """The weights whose packed copy a pass streams instead."""
        return [self.weight]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _kernel_input(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        y = kernel(self.tiling).small_linear(x, self.packed, self.out_features)  # x [..., in]: shapes kept in C++
        return y if self.bias is None else y + self.bias


class FastMLP(torch.nn.Module):
    """down(silu(gate(x)) * up(x)) with gate and up packed together: one kernel call writes
    silu(gate) * up [..., intermediate] (no separate activation and product), then the down
    projection. The projections keep their names (gate_proj, up_proj, down_proj); gate and up run
    themselves only for longer inputs (so they are not packed a second time)."""

    PACKED = ("gate_proj", "up_proj")

    def __init__(self, mlp: torch.nn.Module, tiling: str = "native") -> None:
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj, self.act_fn = mlp.gate_proj, mlp.up_proj, mlp.down_proj, mlp.act_fn
        self.tiling = tiling
        self.intermediate = int(mlp.gate_proj.weight.shape[0])
        gate, up = (p.weight.detach().float().contiguous() for p in (mlp.gate_proj, mlp.up_proj))
        self.register_buffer("packed", kernel(tiling).pack_glu(gate, up, False), persistent=False)

    def streamed_instead(self) -> list[torch.Tensor]:
        """The weights whose packed copy a pass streams instead."""
        return [self.gate_proj.weight, self.up_proj.weight]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _kernel_input(x, self.gate_proj.weight):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(kernel(self.tiling).small_glu(x, self.packed, self.intermediate))


class FastRMSNorm(torch.nn.Module):
    """weight * x / sqrt(mean(x^2) + eps) over the last dimension in one call (Llama's RMSNorm)."""

    def __init__(self, norm: torch.nn.Module, tiling: str = "native") -> None:
        super().__init__()
        self.weight, self.variance_epsilon, self.tiling = norm.weight, float(norm.variance_epsilon), tiling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _kernel_input(x, self.weight) or self.weight.dtype != torch.float32:
            variance = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x.float() * torch.rsqrt(variance + self.variance_epsilon)).to(x.dtype)
        return kernel(self.tiling).rms_norm(x, self.weight, self.variance_epsilon)


def short_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                    is_causal: bool | None = None, *, specdec_tiling: str = "native", **kwargs
                    ) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: query [B, H, n, d], key/value [B, Hk, L, d] (the cache),
    attention_mask None or [B|1, 1|H, n, L] (bool: attend; float: added) -> ([B, n, H, d], None).
    Up to MAX_ROWS CPU float32 query rows with a mask (or a single row), heads of HEAD_DIMS, one
    batch size for q, k and v, no gradient, run in the extension; everything else (a prefill, dropout,
    a position bias or soft cap) goes to SDPA's own function."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    n, length = query.shape[2], key.shape[2]
    if attention_mask is not None and attention_mask.shape[-1] > length:  # transformers 4.x passed a longer mask
        attention_mask = attention_mask[..., :length]
    plain = (n <= MAX_ROWS and (attention_mask is not None or n == 1) and not dropout and not torch.is_grad_enabled()
             and query.shape[-1] in HEAD_DIMS and value.shape[-1] == key.shape[-1] == query.shape[-1]
             and query.shape[0] == key.shape[0] == value.shape[0]
             and kwargs.get("position_bias") is None and kwargs.get("softcap") is None and kwargs.get("s_aux") is None
             and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (query, key, value))
             and (attention_mask is None or attention_mask.dtype in (torch.bool, torch.float32)))
    if not plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return kernel(specdec_tiling).short_attention(query, key, value, attention_mask, scale), None


def register_attention(tiling: str = "native") -> str:
    """Register short_attention (on the kernel built with `tiling`) as a transformers attention
    implementation with SDPA's masks (idempotent); returns its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    name = ATTENTION if tiling == "native" else f"{ATTENTION}_{tiling}"
    AttentionInterface.register(name, partial(short_attention, specdec_tiling=tiling))
    AttentionMaskInterface.register(name, sdpa_mask)
    return name


def _same(original: torch.nn.Module, fast: torch.nn.Module, width: int) -> bool:
    """Whether `fast` reproduces `original` on 3 random rows and on one, at scales 1 and 50 (the large
    one reaches what a module clamps), outputs within 1e-4 x max |output| + 1e-6; False where either
    cannot run on one input of that width (a gated norm wants a second)."""
    x = torch.randn(1, 3, width, generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            for rows in (x, x[:, :1], 50 * x):
                a, b = original(rows), fast(rows)
                if a.shape != b.shape or not bool((a - b).abs().max() <= 1e-4 * a.abs().max() + 1e-6):
                    return False
    except (TypeError, RuntimeError, ValueError):
        return False
    return True


def _one_input(module: torch.nn.Module) -> bool:
    """Whether the module's forward takes exactly one argument (a gated norm's second one, a gate, would be lost)."""
    try:
        return len(inspect.signature(module.forward).parameters) == 1
    except (TypeError, ValueError):
        return False


def _mlp(module: torch.nn.Module, tiling: str) -> FastMLP | None:
    parts = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    if not all(isinstance(p, torch.nn.Linear) and p.bias is None for p in parts) or not hasattr(module, "act_fn") \
            or parts[0].weight.shape != parts[1].weight.shape or not _one_input(module):
        return None
    fast = FastMLP(module, tiling)
    return fast if _same(module, fast, parts[0].weight.shape[1]) else None


def _norm(module: torch.nn.Module, tiling: str) -> FastRMSNorm | None:
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1 or not hasattr(module, "variance_epsilon") \
            or not _one_input(module):
        return None
    fast = FastRMSNorm(module, tiling)
    return fast if _same(module, fast, weight.numel()) else None


def install(model: torch.nn.Module, parts: tuple[str, ...] = PARTS, tiling: str = "native") -> None:
    """Replace `model`'s parts in place (CPU float32 model; `parts` a subset of PARTS)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            fast = (_mlp(child, tiling) if "mlp" in parts else None) or (_norm(child, tiling) if "norm" in parts else None)
            if fast is not None:
                setattr(parent, name, fast)
    if "linear" in parts:
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear) and not (isinstance(parent, FastMLP) and name in FastMLP.PACKED):
                    setattr(parent, name, FastLinear(child, tiling=tiling))
    config = getattr(model, "config", None)
    if "attention" in parts and getattr(config, "_attn_implementation", None) == "sdpa" \
            and getattr(config, "model_type", None) in ATTENTION_MODELS:
        config._attn_implementation = register_attention(tiling)
