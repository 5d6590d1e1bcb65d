"""t(B, k, L) of a decoder-only transformer from its shapes alone: a roofline model of one target
pass over B sequences x k new tokens, each holding L cached tokens, on tp devices
(`specdec costs`; the model, its checks and its measured errors: docs/roofline.md).

Pure numpy: every function broadcasts over arrays of B, k and L. The shapes come from a Hugging
Face config.json (`model_shape`), the device and the dtype from `specdec.simulator.hardware`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import numpy.typing as npt

from specdec.errors import SpecdecError
from specdec.simulator.checks import FloatArray
from specdec.simulator.hardware import Device, Dtype

GIB = 2**30
KERNELS_OUTSIDE_LAYERS = 3  # embedding lookup, final norm, output layer
RUNTIME_MARGIN_BYTES = 1 * GIB  # CUDA context, library workspaces, communication buffers
LOGIT_BYTES = 4  # logits are sampled in fp32
MEMORY_UTILIZATION = 0.9  # the share of a device's memory a server may fill (vLLM's default)
NON_GATED = ("gpt2", "gpt_neox", "phi", "starcoder2")  # model types whose MLP has 2 matrices, not 3


@dataclass(frozen=True)
class ModelShape:
    """What the roofline reads of a model (widths in elements, unsharded)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # the dense MLP's width
    vocab: int
    tied: bool  # the output layer shares the input embedding's weights
    gated: bool  # 3 MLP matrices (gate, up, down: SwiGLU) rather than 2
    experts: int = 0  # routed experts per MoE layer; 0: a dense model
    experts_per_token: int = 0
    expert_intermediate: int = 0  # one routed expert's width
    shared_intermediate: int = 0  # the always-on shared experts' total width
    dense_layers: int = 0  # leading layers of an MoE model with a dense MLP (first_k_dense_replace)

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated else 2

    def split(self, tp: int) -> tuple[float, int]:
        """(query heads, KV heads) per device: query heads split tp ways (tp must divide them), KV
        heads too, each replicated where there are fewer than tp (as vLLM does)."""
        if tp < 1 or self.heads % tp:
            raise SpecdecError(f"tensor parallelism {tp} must divide the {self.heads} attention heads")
        return self.heads / tp, math.ceil(self.kv_heads / tp)

    def attention_weights(self, tp: int) -> float:
        """One layer's attention projections on one device: h (a + 2g) d for q, k, v and a d h for o."""
        a, g = self.split(tp)
        return self.hidden * (a + 2 * g) * self.head_dim + a * self.head_dim * self.hidden

    def resident_weights(self, tp: int) -> float:
        """Weights one device holds (all experts; the input embedding and, untied, the output layer
        split tp ways; routers replicated; norms and biases left out). tp = 1: the parameter count."""
        m, h = self.mlp_matrices, self.hidden
        mlps = ((self.layers - self.moe_layers) * m * h * self.intermediate
                + self.moe_layers * m * h * (self.experts * self.expert_intermediate + self.shared_intermediate))
        return (self.layers * self.attention_weights(tp) + mlps / tp + self.moe_layers * h * self.experts
                + (1 if self.tied else 2) * self.vocab * h / tp)


def model_shape(config: Mapping[str, Any]) -> ModelShape:
    """The shape of a Hugging Face config.json (a multimodal config's "text_config"): Llama /
    Mistral / Qwen2 names, GPT-2's (n_layer, n_embd, n_head, n_inner), and Mixtral / Qwen-MoE /
    DeepSeek-MoE experts (num_local_experts | num_experts | n_routed_experts, num_experts_per_tok,
    moe_intermediate_size, shared_expert_intermediate_size | n_shared_experts, first_k_dense_replace).

    Raises:
        SpecdecError: a missing or non-positive field, or multi-head latent attention (not modeled).
    """
    c = config["text_config"] if isinstance(config.get("text_config"), Mapping) else config
    if c.get("kv_lora_rank"):
        raise SpecdecError("multi-head latent attention (kv_lora_rank, DeepSeek-V2/V3) is not modeled")
    gpt2 = "n_layer" in c

    def size(*names: str, default: int | None = None, low: int = 1) -> int:
        """The first of `names` the config sets (else `default`), an integer >= low."""
        value = next((c[n] for n in names if c.get(n) is not None), default)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise SpecdecError(f"config needs {' or '.join(names)} as an integer >= {low}, got {value!r}")
        return value

    hidden = size("n_embd" if gpt2 else "hidden_size")
    heads = size("n_head" if gpt2 else "num_attention_heads")
    kv_heads = heads if gpt2 else size("num_key_value_heads", default=heads)
    intermediate = size("n_inner", default=4 * hidden) if gpt2 else size("intermediate_size")
    experts = size("num_local_experts", "num_experts", "n_routed_experts", default=0, low=0)
    shape = ModelShape(
        layers=size("n_layer" if gpt2 else "num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=size("head_dim", default=hidden // heads), intermediate=intermediate, vocab=size("vocab_size"),
        tied=bool(c.get("tie_word_embeddings", gpt2)), gated=not gpt2 and c.get("model_type") not in NON_GATED,
        experts=experts, experts_per_token=size("num_experts_per_tok") if experts else 0,
        expert_intermediate=size("moe_intermediate_size", default=intermediate) if experts else 0,
        shared_intermediate=(size("shared_expert_intermediate_size", default=0, low=0)
                             or size("n_shared_experts", default=0, low=0)
                             * size("moe_intermediate_size", default=intermediate)) if experts else 0,
        dense_layers=size("first_k_dense_replace", default=0, low=0) if experts else 0)
    if heads % kv_heads or shape.experts_per_token > experts or shape.dense_layers > shape.layers:
        raise SpecdecError(f"inconsistent config: {heads} heads over {kv_heads} KV heads, "
                           f"{shape.experts_per_token} of {experts} experts per token, "
                           f"{shape.dense_layers} dense of {shape.layers} layers")
    return shape


def expected_experts(experts: int, per_token: int, tokens: npt.ArrayLike) -> FloatArray:
    """Expected number of distinct experts `tokens` tokens touch when each routes to `per_token`
    distinct experts uniformly at random, independently of the others: an expert escapes one
    token with probability 1 - r/E, all N with (1 - r/E)^N, so E (1 - (1 - r/E)^N)."""
    n = np.asarray(tokens, dtype=np.float64)
    return experts * (1.0 - (1.0 - per_token / experts) ** n) if experts else np.zeros_like(n)


@dataclass(frozen=True)
class PassTerms:
    """One pass's work on ONE of the tp devices, by group (arrays broadcast over B, k, L)."""

    weight_bytes: FloatArray  # dense matrices read: attention projections, dense/shared MLPs, routers, output layer
    logits_bytes: FloatArray  # logits written
    dense_flops: FloatArray  # their matrix products
    expert_bytes: FloatArray  # routed experts the tokens touch, read
    expert_flops: FloatArray
    kv_bytes: FloatArray  # KV cache read (L cached tokens) and written (k new ones)
    attention_flops: FloatArray  # scores q.K and the weighted sum of V
    layers: int
    allreduce_bytes: FloatArray  # one all-reduce's payload (B k hidden activations)
    gather_bytes: FloatArray  # the logits' all-gather (vocabulary split tp ways)
    tp: int
    tokens_per_row: FloatArray  # k, the tokens each sequence's pass verifies

    def seconds(self, device: Device, peak_flops: float, per_group: bool = True) -> FloatArray:
        """t = roofline + kernels x launch floor + communication, seconds. per_group: each group
        (dense matrices, experts, attention) is max(bytes / bandwidth, FLOPs / peak) on its own, or
        bytes / bandwidth + FLOPs / peak where the device does not overlap the two
        (`Device.overlap`), and the groups add (a memory-bound attention does not hide
        compute-bound matrices); the cache reads at most at `Device.kv_bandwidth`; a pass verifying
        k > 1 tokens a row adds `Device.verify_layer_s` a layer. False: one max over the whole pass
        (a lower bound of the former)."""
        kv_rate = min(device.bandwidth, device.kv_bandwidth or device.bandwidth)
        groups = [(self.weight_bytes + self.logits_bytes, self.dense_flops), (self.expert_bytes, self.expert_flops),
                  (self.kv_bytes * device.bandwidth / kv_rate, self.attention_flops)]
        if per_group and not device.overlap:
            roof = sum(b / device.bandwidth + f / peak_flops for b, f in groups)
        elif per_group:
            roof = sum(np.maximum(b / device.bandwidth, f / peak_flops) for b, f in groups)
        else:
            roof = np.maximum(sum(b for b, _ in groups) / device.bandwidth, sum(f for _, f in groups) / peak_flops)
        kernels = self.layers * device.kernels_per_layer + KERNELS_OUTSIDE_LAYERS
        verify = self.layers * device.verify_layer_s * (self.tokens_per_row > 1)
        return roof + kernels * device.launch_s + verify + self.communication_seconds(device)

    def communication_seconds(self, device: Device) -> FloatArray:
        """tp > 1: 2 ring all-reduces per layer, 2 (tp - 1) / tp x bytes / link + latency each, and
        the logits' all-gather, (tp - 1) / tp x bytes / link + latency."""
        if self.tp == 1:
            return np.zeros_like(self.allreduce_bytes)
        if device.link_bandwidth is None:
            raise SpecdecError(f"{device.name} states no interconnect: tensor parallelism needs --link-gbs")
        share = (self.tp - 1) / self.tp
        allreduce = 2 * share * self.allreduce_bytes / device.link_bandwidth + device.link_latency_s
        return 2 * self.layers * allreduce + share * self.gather_bytes / device.link_bandwidth + device.link_latency_s


def pass_terms(model: ModelShape, dtype: Dtype, tp: int, batch: npt.ArrayLike, k: npt.ArrayLike,
               context: npt.ArrayLike) -> PassTerms:
    """The work of one pass over N = B k new tokens, B sequences of L cached tokens, on one of tp
    devices (h hidden; a query and g KV heads of width d per device, `ModelShape.split`; f the MLP
    width; m = 3 matrices if gated else 2; V the vocabulary; w / b bytes per weight / activation;
    l layers). Derivations, term by term:

    - dense weights: every layer's attention projections (h (a + 2g) d + a d h), dense MLP
      (m h f / tp), shared experts and router (m h f_shared / tp + h E), and the output layer
      (V h / tp; the input embedding reads only N rows), each read once per pass whatever N:
      bytes = w x weights. A matrix product does one multiply-add per weight per token:
      FLOPs = 2 N x weights.
    - logits written: N V / tp x b bytes.
    - routed experts: each MoE layer reads the distinct experts its N tokens touch
      (`expected_experts`: uniform routing), m h f_e / tp weights each; every token runs r
      experts: FLOPs = 2 N r m h f_e / tp per MoE layer.
    - KV cache: each layer reads L cached keys and values and writes k new ones per sequence,
      l B (L + k) 2 g d b bytes; attention FLOPs: per query token and head, 2 (L + k) d for q.K and
      2 (L + k) d for the weighted sum of V: l 4 N (L + k) a d (every new token counted against
      all L + k keys: at most k^2 / 2 too many).
    - communication (tp > 1): 2 all-reduces per layer (after attention, after the MLP) of N h b
      bytes each, and an all-gather of the N V b logit bytes.
    Activations between kernels (a few N h b bytes per layer) are left out: small next to the
    weights while a pass is memory-bound, and hidden under the FLOPs once it is compute-bound.
    """
    a, g = model.split(tp)
    b_, k_, ctx = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (batch, k, context)))
    n = b_ * k_
    m, h, d, w, act = model.mlp_matrices, model.hidden, model.head_dim, dtype.weight_bytes, dtype.act_bytes
    dense = (model.layers * model.attention_weights(tp)
             + (model.layers - model.moe_layers) * m * h * model.intermediate / tp
             + model.moe_layers * (m * h * model.shared_intermediate / tp + h * model.experts) + model.vocab * h / tp)
    expert = m * h * model.expert_intermediate / tp
    attended = ctx + k_
    return PassTerms(
        weight_bytes=np.full(n.shape, dense * w), logits_bytes=n * model.vocab / tp * act, dense_flops=2 * n * dense,
        expert_bytes=model.moe_layers * expected_experts(model.experts, model.experts_per_token, n) * expert * w,
        expert_flops=2 * n * model.moe_layers * model.experts_per_token * expert,
        kv_bytes=model.layers * b_ * attended * 2 * g * d * act,
        attention_flops=model.layers * 4 * n * attended * a * d,
        layers=model.layers, allreduce_bytes=n * h * act, gather_bytes=n * model.vocab * act, tp=tp,
        tokens_per_row=k_)


def pass_seconds(model: ModelShape, dtype: Dtype, device: Device, tp: int, batch: npt.ArrayLike, k: npt.ArrayLike,
                 context: npt.ArrayLike, per_group: bool = True) -> FloatArray:
    """t(B, k, L) in seconds, broadcast over B, k and L (`pass_terms`, `PassTerms.seconds`)."""
    return pass_terms(model, dtype, tp, batch, k, context).seconds(device, device.flops_for(dtype), per_group)


@dataclass(frozen=True)
class MemoryFit:
    """What one device must hold to serve B sequences of L + k tokens, bytes."""

    weights: float  # `ModelShape.resident_weights` x bytes per weight
    kv_cache: float  # B (L + k) tokens in every layer
    margin: float  # RUNTIME_MARGIN_BYTES + the fp32 logits of one pass
    available: float  # capacity x MEMORY_UTILIZATION

    @property
    def needed(self) -> float:
        return self.weights + self.kv_cache + self.margin

    @property
    def fits(self) -> bool:
        return self.needed <= self.available

    def message(self, batch: int) -> str:
        """One line: needed vs available."""
        return (f"batch {batch} needs {self.needed / GIB:.1f} GiB per device (weights {self.weights / GIB:.1f}, "
                f"KV cache {self.kv_cache / GIB:.1f}, margin {self.margin / GIB:.1f}) but {self.available / GIB:.1f} "
                f"GiB are available ({MEMORY_UTILIZATION:.0%} of {self.available / MEMORY_UTILIZATION / GIB:.1f})")


def memory_fit(model: ModelShape, dtype: Dtype, device: Device, tp: int, batch: int, context: int, k: int) -> MemoryFit:
    """Memory per device for `batch` sequences of `context` + k tokens, each device one tp-th."""
    _, g = model.split(tp)
    kv = model.layers * batch * (context + k) * 2 * g * model.head_dim * dtype.act_bytes
    return MemoryFit(model.resident_weights(tp) * dtype.weight_bytes, kv,
                     RUNTIME_MARGIN_BYTES + batch * k * model.vocab * LOGIT_BYTES,
                     device.memory_bytes * MEMORY_UTILIZATION)
