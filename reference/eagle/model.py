"""A feature-level draft on the frozen target (EAGLE, Li et al. 2024): autoregression over the
target's final hidden states.

Entry i of the draft's sequence pairs the feature f_i (the target's final hidden state at
position i, the output layer's input) with the token x_(i+1) the target then produced:
x = fc([e(x_(i+1)); f_i]), one Llama-style decoder layer (RMSNorm, rotary positions, grouped
attention over the earlier entries, SwiGLU) turns it into f^_(i+1), the predicted next
feature, and the target's frozen output layer E' (restricted to `vocab`, the ids the target
predicts often) gives the draft q of x_(i+2). Drafting feeds f^ back as the next entry's
feature. The layer has the target's shapes (for a Llama-family target it is one of its own
layers, freshly initialised); fc is initialised to pass f through and the layer's output
projections to zero, so an untrained draft predicts from f itself. A deeper draft (`depth` > 1,
`specdec eagle train --draft-layers`) stacks such layers, each attending over its own cache.

With `layers` (EAGLE-3's fusion of low, middle and high features), a committed entry's feature
is g = fuse([n(h_a); n(h_b); ...; f]) instead of f, where h_i is the target's hidden state after
decoder layer i and n is a weightless RMS normalisation (the residual stream's scale grows with
depth); fuse starts as the projection onto f. Drafted entries keep the draft's own f^ as their
feature, as in EAGLE-3. docs/eagle.md.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from specdec.errors import SpecdecError
from specdec.reference.core.seams import Needs
from specdec.reference.heads.model import full_logits


@dataclass(frozen=True)
class LayerShape:
    """The decoder layer's sizes (read from the target's config by `shape_of`)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float = 10_000.0
    eps: float = 1e-6

    def to_dict(self) -> dict:
        return asdict(self)


def shape_of(config, hidden: int) -> LayerShape:
    """The target's layer sizes; GPT-2-style configs (n_head, n_inner) fall back to 4d MLPs."""
    heads = int(getattr(config, "num_attention_heads", None) or getattr(config, "n_head", 1))
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    rope = getattr(config, "rope_parameters", None) or {}
    theta = rope.get("rope_theta") if isinstance(rope, dict) else None
    return LayerShape(hidden, heads, int(getattr(config, "num_key_value_heads", None) or heads), head_dim,
                      int(getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * hidden),
                      float(theta or getattr(config, "rope_theta", None) or 10_000.0),
                      float(getattr(config, "rms_norm_eps", None) or 1e-6))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class Block(torch.nn.Module):
    """One Llama-style decoder layer: RMSNorm, rotary grouped attention, RMSNorm, SwiGLU, residuals.
    Initialised with its output projections zero (the identity)."""

    def __init__(self, shape: LayerShape) -> None:
        super().__init__()
        d, hd = shape.hidden, shape.head_dim
        linear = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.q, self.k, self.v = linear(d, shape.heads * hd), linear(d, shape.kv_heads * hd), linear(d, shape.kv_heads * hd)
        self.o = linear(shape.heads * hd, d)
        self.gate, self.up, self.down = linear(d, shape.intermediate), linear(d, shape.intermediate), \
            linear(shape.intermediate, d)
        self.norm_in = torch.nn.Parameter(torch.ones(d))
        self.norm_post = torch.nn.Parameter(torch.ones(d))
        with torch.no_grad():
            for layer in (self.q, self.k, self.v, self.gate, self.up):
                layer.weight.normal_(0.0, 0.02)
            self.o.weight.zero_()
            self.down.weight.zero_()

    LINEAR = ("q", "k", "v", "o", "gate", "up", "down")
    NAMES = LINEAR + ("norm_in", "norm_post")  # its tensors' names (as saved under "blocks.<i>.")

    def forward(self, x: torch.Tensor, positions: torch.Tensor, rotate, past: tuple[torch.Tensor, torch.Tensor] | None,
                mask: torch.Tensor, s: LayerShape) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, _ = x.shape
        h = rms_norm(x, self.norm_in, s.eps)
        q = rotate(self.q(h).view(b, n, s.heads, s.head_dim), positions)
        k = rotate(self.k(h).view(b, n, s.kv_heads, s.head_dim), positions)
        v = self.v(h).view(b, n, s.kv_heads, s.head_dim)
        keys, values = (k, v) if past is None else (torch.cat([past[0], k], 1), torch.cat([past[1], v], 1))
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                              attn_mask=mask[:, None], enable_gqa=s.heads != s.kv_heads)
        x = x + self.o(attn.transpose(1, 2).reshape(b, n, s.heads * s.head_dim))
        h = rms_norm(x, self.norm_post, s.eps)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), k, v


class EagleDraft(torch.nn.Module):
    """fc + `depth` decoder layers (trained; EAGLE's default and the engines' is one) over the
    target's frozen embeddings and restricted output layer.

    vocab: int64 [V'] target ids the draft can propose; out_weight [V', d] (frozen copy, not
    saved); embedding [vocab_size, d] (the target's, shared, not saved). The cache of every
    layer travels as one pair of tensors: keys and values [B, m, depth * kv_heads, hd], layer i's
    in the i-th group of kv_heads along dim 2 (so a caller concatenates entries along dim 1
    whatever the depth).
    """

    def __init__(self, shape: LayerShape, vocab: torch.Tensor, out_weight: torch.Tensor,
                 embedding: torch.Tensor, layers: tuple[int, ...] = (), depth: int = 1) -> None:
        super().__init__()
        d, hd = shape.hidden, shape.head_dim
        if out_weight.shape != (vocab.numel(), d) or embedding.shape[1] != d:
            raise ValueError(f"out_weight must be [{vocab.numel()}, {d}] and embedding [vocab_size, {d}]")
        if shape.heads % shape.kv_heads:
            raise ValueError(f"{shape.heads} attention heads do not split into {shape.kv_heads} key/value groups")
        if depth < 1:
            raise ValueError(f"a draft has at least one decoder layer, got {depth}")
        self.shape = shape
        self.layers = tuple(int(i) for i in layers)
        self.fc = torch.nn.Linear(2 * d, d, bias=False)
        self.blocks = torch.nn.ModuleList(Block(shape) for _ in range(depth))
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.weight[:, d:] = torch.eye(d)  # x = f at initialisation
        if self.layers:
            self.fuse = torch.nn.Linear((len(self.layers) + 1) * d, d, bias=False)
            with torch.no_grad():
                self.fuse.weight.zero_()
                self.fuse.weight[:, -d:] = torch.eye(d)  # g = f at initialisation
        self.register_buffer("vocab", vocab.to(torch.long).clone())
        self.register_buffer("inv_freq", 1.0 / shape.rope_theta ** (torch.arange(0, hd, 2).float() / hd),
                             persistent=False)
        self.register_buffer("embedding", embedding.detach(), persistent=False)
        self.out = torch.nn.Linear(d, vocab.numel(), bias=False)
        self.out.weight = torch.nn.Parameter(out_weight.detach().float().clone(), requires_grad=False)

    @property
    def depth(self) -> int:
        """Decoder layers in the draft."""
        return len(self.blocks)

    @staticmethod
    def depth_text(depth: int) -> str:
        """"one layer" or "N layers", as the notes and the CLI print a draft's depth."""
        return "one layer" if depth == 1 else f"{depth} layers"

    def trained(self) -> dict[str, torch.Tensor]:
        """The trained tensors by name (what is saved)."""
        return {name: p for name, p in self.named_parameters() if p.requires_grad}

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotary positions (Llama's rotate-half form): x [..., n, heads, hd], positions [..., n]."""
        freqs = positions[..., None].float() * self.inv_freq  # [..., n, hd / 2]
        cos = torch.cat([freqs, freqs], -1).cos()[..., None, :]
        sin = torch.cat([freqs, freqs], -1).sin()[..., None, :]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    @property
    def needs(self) -> Needs:
        """What the draft reads from the target's passes: the final features, and the fused layers'."""
        return Needs(hidden=True, layers=self.layers)

    def committed(self, hidden: torch.Tensor, layers: torch.Tensor | None) -> torch.Tensor:
        """The feature of committed entries: the target's final hidden states [..., d], fused with
        its hidden states after `self.layers` ([..., len(layers), d]) when the draft has any."""
        if not self.layers:
            return hidden
        if layers is None or layers.shape[-2] != len(self.layers):
            raise ValueError(f"this draft fuses the target's layers {self.layers}: pass their hidden states")
        normed = layers * torch.rsqrt(layers.pow(2).mean(-1, keepdim=True) + self.shape.eps)
        return self.fuse(torch.cat([normed.flatten(-2), hidden], -1))

    def forward(self, feature: torch.Tensor, token: torch.Tensor, positions: torch.Tensor,
                past: tuple[torch.Tensor, torch.Tensor] | None, allowed: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """New entries attending to `past` entries and to each other as `allowed` says.

        feature [B, n, d], token int64 [B, n], positions int64 [B, n]; past: (keys, values)
        [B, m, depth * kv_heads, hd] of earlier entries (None: m = 0); allowed bool [n, m + n] or
        [B, n, m + n]: which of past + new each new entry attends to (itself at least).
        Returns (predicted next features [B, n, d], keys, values [B, n, depth * kv_heads, hd] of
        the new entries, rotated)."""
        x = self.fc(torch.cat([self.embedding[token].to(feature.dtype), feature], -1))
        mask = allowed if allowed.ndim == 3 else allowed[None]
        kv = self.shape.kv_heads
        keys, values = [], []
        for i, block in enumerate(self.blocks):
            layer_past = None if past is None else (past[0][:, :, i * kv:(i + 1) * kv], past[1][:, :, i * kv:(i + 1) * kv])
            x, k, v = block(x, positions, self.rotate, layer_past, mask, self.shape)
            keys.append(k)
            values.append(v)
        if len(keys) == 1:
            return x, keys[0], values[0]
        return x, torch.cat(keys, 2), torch.cat(values, 2)

    def packed_bf16(self) -> EagleDraft:
        """This draft for drafting (not training): its matrices - fc, the fusion, the layer's
        projections and the restricted output layer - rounded to bfloat16 and run, for up to 16
        rows, by the fast kernel from bfloat16 panels: a drafted token streams half the bytes
        (the draft's weights are read from memory anew after every target pass). Its q is that
        of the rounded draft everywhere (drafting, the estimator's unrolled pass); decoding stays
        exact whatever q is.

        Raises SpecdecError (one line naming weights=bf16) off the CPU or without the kernel."""
        from specdec.reference.model.backend import available
        from specdec.reference.model.fast_modules import FastLinear

        why = available(self)
        if why is not None:
            raise SpecdecError(f"eagle option weights=bf16 runs on the fast CPU kernel: {why}")
        for owner, names in [(self, ("fc", "out") + (("fuse",) if self.layers else ()))] + \
                [(block, Block.LINEAR) for block in self.blocks]:
            for name in names:
                setattr(owner, name, FastLinear(getattr(owner, name), bf16=True))
        return self

    def logits(self, feature: torch.Tensor) -> torch.Tensor:
        """Restricted logits [..., V'] (column j is target id vocab[j]) of predicted features [..., d]."""
        return self.out(feature)

    def full_logits(self, restricted: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """Restricted logits [..., V'] -> logits over the target's vocabulary, -inf outside `vocab`."""
        return full_logits(restricted, self.vocab, vocab_size)

    def flops_per_token(self) -> float:
        """Multiply-adds x 2 of one drafted token: fc, the layers' projections, the restricted output
        (and the fusion of one committed entry's features)."""
        s = self.shape
        layer = s.hidden * s.head_dim * (2 * s.heads + 2 * s.kv_heads) + 3 * s.hidden * s.intermediate
        weights = 2 * s.hidden * s.hidden + self.depth * layer + s.hidden * self.vocab.numel() \
            + (len(self.layers) + 1) * s.hidden * s.hidden * bool(self.layers)
        return 2.0 * weights


def draft_on(model: torch.nn.Module, vocab: torch.Tensor, layers: tuple[int, ...] = (), depth: int = 1
             ) -> EagleDraft:
    """An untrained draft of `depth` decoder layers on the target `model`, on its device (fusing
    the hidden states after decoder layers `layers`, 1 <= i < the model's layer count)."""
    out_layer = model.get_output_embeddings().weight
    check_fuse(model.config, layers)
    vocab = vocab.to(out_layer.device)
    shape = shape_of(model.config, int(out_layer.shape[1]))
    return EagleDraft(shape, vocab, out_layer.detach()[vocab], model.get_input_embeddings().weight,
                      layers, depth).to(out_layer.device)


def check_fuse(config, layers: tuple[int, ...]) -> None:
    """One line naming --fuse-layers unless `layers` are distinct decoder layers of the target."""
    count = fusable_layers(config)
    if any(not 1 <= i < count for i in layers) or len(set(layers)) != len(layers):
        raise SpecdecError(f"--fuse-layers: distinct decoder layers 1..{count - 1} of this target, got {list(layers)}")


def fusable_layers(config) -> int:
    """The target's decoder layer count (hidden_states index L is the final, normalised one)."""
    return int(getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", 0))


def eagle3_layers(config) -> tuple[int, ...]:
    """EAGLE-3's low, middle and high layers as the engines pick them (vLLM's and SGLang's
    defaults: 2, L // 2, L - 3)."""
    count = fusable_layers(config)
    return tuple(sorted({min(2, count - 1), count // 2, max(1, count - 3)}))
