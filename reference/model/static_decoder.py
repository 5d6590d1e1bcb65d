"""A Llama-family decoder with a static KV cache whose verify pass can be captured once per shape
and replayed (CUDA graphs, the way gpt-fast decodes): t(B, k, L) of the hardware rather than of
Python launching thousands of operations (`specdec estimate --batch-sizes` on CUDA,
benchmarks/gpu_check.sh; why: docs/roofline.md, "The captured path").

A pass takes B rows of k new tokens each at cache positions L..L+k-1 and returns their logits
[B, k, V]: the target's verify pass in speculative decoding (k = gamma + 1) and its plain
decoding step (k = 1). The layout is a serving engine's: q, k and v projected by one matrix,
the MLP's gate and up by one, the cache [layers, B_max, g, T_max, d] preallocated, grouped
query heads folded onto their KV head (no repeated keys), a static mask per (k, L).

Weights are random (`StaticDecoder.random`: a dense pass's time does not depend on their
values) or copied from a transformers Llama/Mistral/Qwen2 model (`StaticDecoder.from_hf`), whose
logits it reproduces (tests/test_static_decoder.py). Names: B rows, k new tokens, L cached
tokens, a query and g KV heads of width d, h hidden, f the MLP's width, V the vocabulary.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F

from specdec.simulator.roofline import model_shape


@dataclass(frozen=True)
class DecoderShape:
    """What the static decoder builds (from a config.json: `DecoderShape.of`)."""

    layers: int
    hidden: int  # h
    heads: int  # a query heads
    kv_heads: int  # g
    head_dim: int  # d
    intermediate: int  # f
    vocab: int  # V
    tied: bool  # the output layer is the input embedding
    rope_theta: float = 10000.0
    eps: float = 1e-5
    qkv_bias: bool = False  # Qwen2's q, k and v projections carry biases

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "DecoderShape":
        """The shape of a Llama / Mistral / Qwen2 config.json (gated MLP, RoPE, RMS norms)."""
        s = model_shape(config)
        if not s.gated or s.experts:
            raise ValueError("the static decoder builds dense gated (Llama-family) models only")
        rope = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), Mapping) else config
        return cls(s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate, s.vocab, s.tied,
                   float(rope.get("rope_theta", 10000.0)), float(config.get("rms_norm_eps", 1e-5)),
                   config.get("model_type") == "qwen2")

    @property
    def weight_count(self) -> int:
        """Weights one pass reads: every layer's projections and MLP, and the output layer."""
        a, g, d, h = self.heads, self.kv_heads, self.head_dim, self.hidden
        return self.layers * (h * (a + 2 * g) * d + a * d * h + 3 * h * self.intermediate) + self.vocab * h


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm: normalised in fp32, scaled in the model's dtype."""
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _add_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual sum x + y and its RMS norm (one kernel once compiled)."""
    x = x + y
    return x, _rms_norm(x, weight, eps)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in transformers' half-split layout: x cos + rotate_half(x) sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _rope_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
              kv_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv [B, k, a + 2g, d] -> rotated q [B, a, k, d], rotated keys and values [B, g, k, d]."""
    q, keys, values = qkv.transpose(1, 2).split((heads, kv_heads, kv_heads), dim=1)
    return _rotate(q, cos, sin), _rotate(keys, cos, sin), values


def _silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """SwiGLU's silu(gate) * up of the concatenated [.., 2f] projection."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def _merge_new(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor | None,
               out_cached: torch.Tensor, lse_cached: torch.Tensor) -> torch.Tensor:
    """Attention of the folded queries q [B, g, R, d] over the k new keys and values [B, g, k, d]
    (`bias` [R, k]: 0 where visible, -inf where not; None: all visible), merged with their
    attention over the cached keys (out_cached [B, g, R, d], its log-sum-exp lse_cached [B, g, R])
    by the two parts' log-sum-exps, as FlashInfer merges attention states."""
    scores = (q.float() @ keys.float().transpose(-1, -2)) * q.shape[-1] ** -0.5
    if bias is not None:
        scores = scores + bias
    lse_new = torch.logsumexp(scores, dim=-1)
    share = torch.sigmoid(lse_cached - lse_new)[..., None]  # the cached keys' share of the softmax mass
    out_new = torch.softmax(scores, dim=-1) @ values.float()
    return (out_cached.float() * share + out_new * (1 - share)).to(q.dtype)


def _cached_math(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unmasked attention of q [B, g, R, d] over keys, values [B, g, L, d]: (out, log-sum-exp [B, g, R])."""
    scores = (q.float() @ keys.float().transpose(-1, -2)) * q.shape[-1] ** -0.5
    return (torch.softmax(scores, dim=-1) @ values.float()).to(q.dtype), torch.logsumexp(scores, dim=-1)


def _cached_flash(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`_cached_math` through FlashAttention-2 (its split-KV decode kernel when the rows are few)."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, keys, values, 0.0, False, False)[:2]
    return out, lse[..., :q.shape[2]]


@dataclass(frozen=True)
class Ops:
    """The elementwise pieces between the matrix products: eager, or each compiled into one kernel
    (`torch.compile(dynamic=True)`, what a serving engine's fused kernels do)."""

    add_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]] = _add_norm
    norm: Callable[..., torch.Tensor] = _rms_norm
    rope_qkv: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = _rope_qkv
    silu_mul: Callable[..., torch.Tensor] = _silu_mul
    merge_new: Callable[..., torch.Tensor] = _merge_new

    @classmethod
    def compiled(cls) -> "Ops":
        return cls(*(torch.compile(f, dynamic=True, fullgraph=True) for f in (_add_norm, _rms_norm, _rope_qkv,
                                                                             _silu_mul, _merge_new)))


def _flash(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """FlashAttention-2 over q [B, a, k, d] and the cache [B, g, L + k, d] (grouped heads native);
    causal with the diagonal aligned to the last key (flash's is_causal when k < L + k), so new
    token i sees keys 0..L+i."""
    k = q.shape[2]
    return torch.ops.aten._scaled_dot_product_flash_attention(q, keys, values, 0.0, k > 1, False)[0]


# "masked": SDPA with a boolean mask (the reference); "flash": FlashAttention-2 with its own causal
# mask, per query head; "split": the cached keys through FlashAttention-2 (CUDA; plain ops elsewhere),
# every query head of a KV head in one pass, the k new keys apart, merged by log-sum-exp.
ATTENTION = ("masked", "flash", "split")


class StaticDecoder:
    """Weights, a preallocated cache for up to `max_batch` rows of `max_tokens` tokens, and `step`."""

    def __init__(self, shape: DecoderShape, weights: dict[str, torch.Tensor], max_batch: int, max_tokens: int,
                 fused: bool = False, attention: str | None = None):
        """fused: compile the elementwise pieces (`Ops.compiled`). attention (`ATTENTION`): None picks
        on CUDA in 16 bits the first of "split", "flash" that a probe finds equal to "masked", else
        "masked"."""
        self.shape, self.w = shape, weights
        self.ops = Ops.compiled() if fused else Ops()
        ref = weights["embed"]
        self.device, self.dtype = ref.device, ref.dtype
        g, d = shape.kv_heads, shape.head_dim
        self.keys = torch.zeros(shape.layers, max_batch, g, max_tokens, d, device=self.device, dtype=self.dtype)
        self.values = torch.zeros_like(self.keys)
        inv = 1.0 / shape.rope_theta ** (torch.arange(0, d, 2, device=self.device, dtype=torch.float32) / d)
        angles = torch.outer(torch.arange(max_tokens, device=self.device, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.cos, self.sin = angles.cos().to(self.dtype), angles.sin().to(self.dtype)
        if attention not in (None, *ATTENTION):
            raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
        self.attention = attention or "masked"
        if attention is None and self.device.type == "cuda" and self.dtype in (torch.bfloat16, torch.float16):
            self.attention = next((m for m in ("split", "flash") if self._agrees(m)), "masked")

    def _agrees(self, mode: str) -> bool:
        """Attention `mode` on a probe (k = 3 new tokens after 10 cached, the model's heads) equals
        the masked reference: its kernels run here and their causal alignment is a verify pass's."""
        a, g, d = self.shape.heads, self.shape.kv_heads, self.shape.head_dim
        gen = torch.Generator(device=self.device).manual_seed(0)
        q, keys, values = (torch.randn(2, n, t, d, device=self.device, dtype=self.dtype, generator=gen)
                           for n, t in ((a, 3), (g, 13), (g, 13)))
        want = self._attend("masked", q, keys, values, 10, self._mask("masked", 3, 10))
        try:
            got = self._attend(mode, q, keys, values, 10, self._mask(mode, 3, 10))
        except RuntimeError:
            return False
        return bool(torch.allclose(got.float(), want.float(), atol=2e-2, rtol=2e-2))
    @classmethod
    def random(cls, shape: DecoderShape, max_batch: int, max_tokens: int, dtype: torch.dtype, device: str,
               generator: torch.Generator | None = None, fused: bool = False,
               attention: str | None = None) -> "StaticDecoder":
        """Random weights N(0, 0.02) (norms 1) built on `device` directly."""
        a, g, d, h, f = shape.heads, shape.kv_heads, shape.head_dim, shape.hidden, shape.intermediate

        def normal(*size: int) -> torch.Tensor:
            return torch.empty(*size, device=device, dtype=dtype).normal_(0.0, 0.02, generator=generator)

        weights: dict[str, torch.Tensor] = {"embed": normal(shape.vocab, h),
                                            "norm": torch.ones(h, device=device, dtype=dtype)}
        if not shape.tied:
            weights["head"] = normal(shape.vocab, h)
        for i in range(shape.layers):
            weights |= {f"{i}.qkv": normal((a + 2 * g) * d, h), f"{i}.o": normal(h, a * d),
                        f"{i}.gate_up": normal(2 * f, h), f"{i}.down": normal(h, f),
                        f"{i}.in_norm": torch.ones(h, device=device, dtype=dtype),
                        f"{i}.post_norm": torch.ones(h, device=device, dtype=dtype)}
            if shape.qkv_bias:
                weights[f"{i}.qkv_bias"] = normal((a + 2 * g) * d)
        return cls(shape, weights, max_batch, max_tokens, fused, attention)

    @classmethod
    def from_hf(cls, model: torch.nn.Module, max_batch: int, max_tokens: int, fused: bool = False,
                attention: str | None = None) -> "StaticDecoder":
        """The weights of a transformers Llama-family causal LM (q, k, v and gate, up concatenated)."""
        shape = DecoderShape.of(model.config.to_dict())
        sd = {k: v.detach() for k, v in model.state_dict().items()}
        weights = {"embed": sd["model.embed_tokens.weight"], "norm": sd["model.norm.weight"]}
        if not shape.tied:
            weights["head"] = sd["lm_head.weight"]
        for i in range(shape.layers):
            p = f"model.layers.{i}."
            weights |= {f"{i}.qkv": torch.cat([sd[p + f"self_attn.{n}_proj.weight"] for n in "qkv"]),
                        f"{i}.o": sd[p + "self_attn.o_proj.weight"],
                        f"{i}.gate_up": torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]]),
                        f"{i}.down": sd[p + "mlp.down_proj.weight"],
                        f"{i}.in_norm": sd[p + "input_layernorm.weight"],
                        f"{i}.post_norm": sd[p + "post_attention_layernorm.weight"]}
            if shape.qkv_bias:
                weights[f"{i}.qkv_bias"] = torch.cat([sd[p + f"self_attn.{n}_proj.bias"] for n in "qkv"])
        return cls(shape, weights, max_batch, max_tokens, fused, attention)

    def mask(self, k: int, start: int) -> torch.Tensor | None:
        """What this model's attention needs to keep k new tokens at L = start causal (`_mask`)."""
        return self._mask(self.attention if start else "masked", k, start)

    def _mask(self, mode: str, k: int, start: int) -> torch.Tensor | None:
        """The folded query rows (query head j of a KV head, new token i at row j k + i; R = (a / g) k):
        "masked": [R, L + k] bool, key t visible iff t <= L + i; "split": [R, k] additive over the new
        keys, 0 for new key t <= i and -inf after; "flash" (its own causal mask) and k = 1: None."""
        if k == 1 or mode == "flash":
            return None
        rows = torch.arange(k, device=self.device).repeat(self.shape.heads // self.shape.kv_heads)
        if mode == "masked":
            return torch.arange(start + k, device=self.device)[None, :] <= start + rows[:, None]
        visible = torch.arange(k, device=self.device)[None, :] <= rows[:, None]
        return torch.zeros(visible.shape, device=self.device).masked_fill_(~visible, float("-inf"))

    def _attend(self, mode: str, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, start: int,
                mask: torch.Tensor | None) -> torch.Tensor:
        """Attention of q [B, a, k, d] at positions L = start.. over keys, values [B, g, L + k, d]:
        [B, a, k, d]. Each KV head's query heads are folded onto it (no repeated keys) except in
        "flash", whose kernel reads a KV head once per query head when k > 1. "split" at k = 1 is
        one unmasked pass over the whole cache."""
        b, a, k, d = q.shape
        g = keys.shape[1]
        if mode == "flash":
            return _flash(q, keys, values)
        folded = q.reshape(b, g, a // g * k, d)
        if mode == "masked":
            return F.scaled_dot_product_attention(folded, keys, values, attn_mask=mask).view(b, a, k, d)
        cached = _cached_flash if self.device.type == "cuda" else _cached_math
        if k == 1:  # one new token sees every key: the whole cache in one pass, nothing to merge
            return cached(folded, keys, values)[0].view(b, a, k, d)
        out, lse = cached(folded, keys[:, :, :start], values[:, :, :start])
        return self.ops.merge_new(folded, keys[:, :, start:], values[:, :, start:], mask, out, lse).view(b, a, k, d)

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor, start: int, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, k, V] of tokens [B, k] at positions start..start+k-1 of rows 0..B-1, their keys
        and values written into the cache (what was cached at start.. is overwritten). `mask`:
        `self.mask(k, start)`, made once outside a captured graph (built here when None)."""
        s, w, ops = self.shape, self.w, self.ops
        b, k = tokens.shape
        a, g, d = s.heads, s.kv_heads, s.head_dim
        end = start + k
        if mask is None:
            mask = self.mask(k, start)
        cos, sin = self.cos[start:end], self.sin[start:end]
        x = F.embedding(tokens, w["embed"])
        h = ops.norm(x, w["0.in_norm"], s.eps)
        for i in range(s.layers):
            qkv = F.linear(h, w[f"{i}.qkv"], w.get(f"{i}.qkv_bias")).view(b, k, a + 2 * g, d)
            q, kk, v = ops.rope_qkv(qkv, cos, sin, a, g)
            self.keys[i, :b, :, start:end] = kk
            self.values[i, :b, :, start:end] = v
            cached = self.keys[i, :b, :, :end], self.values[i, :b, :, :end]
            out = self._attend(self.attention if start else "masked", q, *cached, start, mask)
            x, h = ops.add_norm(x, F.linear(out.transpose(1, 2).reshape(b, k, a * d), w[f"{i}.o"]),
                                w[f"{i}.post_norm"], s.eps)
            down = F.linear(ops.silu_mul(F.linear(h, w[f"{i}.gate_up"])), w[f"{i}.down"])
            x, h = ops.add_norm(x, down, w[f"{i + 1}.in_norm" if i + 1 < s.layers else "norm"], s.eps)
        return F.linear(h, w.get("head", w["embed"]))

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """`step` over the whole prompt [B, T] from position 0 (uncaptured)."""
        return self.step(tokens, 0)


@dataclass(frozen=True)
class StepTiming:
    """One (B, k, L) cell: seconds per pass (median of `trials`, each the mean of `replays`)."""

    batch: int
    k: int
    context: int
    seconds: float
    spread: float  # (max - min) / median over the trials
    captured: bool  # replayed as a CUDA graph (False: eager, on the CPU)


def time_step(model: StaticDecoder, batch: int, k: int, context: int, trials: int = 3,
              target_seconds: float = 0.03,
              generator: torch.Generator | None = None) -> StepTiming:
    """t(B, k, L) of `model.step`: on CUDA captured once as a graph and replayed (CUDA events
    around `replays` replays; `replays` chosen so one trial lasts about target_seconds), elsewhere
    eager with a wall clock. The cache's contents do not change a pass's cost, so no prefill."""
    tokens = torch.randint(0, model.shape.vocab, (batch, k), device=model.device, generator=generator)
    mask = model.mask(k, context)
    cuda = model.device.type == "cuda"
    run: Callable[[], Any]
    if cuda:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model.step(tokens, context, mask)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model.step(tokens, context, mask)
        run = graph.replay
    else:
        def run() -> None:
            model.step(tokens, context, mask)
    once = mean_seconds(run, 1, cuda)  # warm, and the size of a trial
    once = mean_seconds(run, 1, cuda)
    replays = max(1, min(1000, round(target_seconds / max(once, 1e-7))))
    times = sorted(mean_seconds(run, replays, cuda) for _ in range(trials))
    median = times[len(times) // 2]
    return StepTiming(batch, k, context, median, (times[-1] - times[0]) / median, cuda)


def mean_seconds(run: Callable[[], Any], n: int, cuda: bool) -> float:
    """Mean seconds of `run` over n calls (CUDA events on the GPU's queue; a wall clock elsewhere)."""
    if cuda:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(n):
            run()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1000 / n
    start = time.perf_counter()
    for _ in range(n):
        run()
    return (time.perf_counter() - start) / n
