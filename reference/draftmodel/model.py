"""An independent draft model cut from the target: a Llama decoder with the target's width,
tokenizer and vocabulary, a few decoder layers, and the target's embedding as its (tied,
frozen) output layer.

At SmolLM2-135M's vocabulary the 49,152 x 576 embedding is 28.3 M of the target's 134.5 M
parameters; a new, smaller embedding would have to be learnt from scratch on a CPU budget, so
the draft keeps the target's (shared by reference while training, copied on save; the output
layer too, which SmolLM2 ties to the embedding) and trains
only its decoder layers and final norm. Its layers start as copies of target layers
(`source_layers`), so the untrained draft is the target with most of its layers skipped.
The method and its costs: docs/draft-model.md.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from specdec.errors import SpecdecError


@dataclass(frozen=True)
class DraftShape:
    """layers: decoder layers of the draft; source_layers: the target layers they start as
    (one per draft layer, in order; () = `default_sources`)."""

    layers: int = 1
    source_layers: tuple[int, ...] = ()

    def sources(self, target_layers: int) -> tuple[int, ...]:
        """The checked target layers the draft's layers copy."""
        picked = self.source_layers or default_sources(self.layers, target_layers)
        if len(picked) != self.layers or any(not 0 <= i < target_layers for i in picked):
            raise SpecdecError(f"source layers {picked} must be {self.layers} layer numbers in 0..{target_layers - 1}")
        return tuple(picked)


def default_sources(layers: int, target_layers: int) -> tuple[int, ...]:
    """The target's first `layers` layers. Measured on SmolLM2-135M (held-out top-1 of the
    untrained draft): layer 0 alone 0.081, layers 0-1 0.054, 0 and 29 0.000 (a late layer fed
    early features breaks the output), so early layers are the better start (docs/draft-model.md)."""
    if layers < 1 or layers > target_layers:
        raise SpecdecError(f"a draft of {layers} layers from a target of {target_layers}")
    return tuple(range(layers))


def check_llama(target: PreTrainedModel) -> None:
    """The draft is a Llama: a refusal in one line for any other target architecture."""
    if getattr(target.config, "model_type", None) != "llama":
        raise SpecdecError(f"the draft model copies a Llama target; this target is a "
                           f"{getattr(target.config, 'model_type', '?')!r} model")


def draft_from(target: PreTrainedModel, shape: DraftShape) -> LlamaForCausalLM:
    """The untrained draft: the target's config with `shape.layers` layers, its embedding and output
    layer (the same tensors, frozen; one tensor when the target ties them), copies of the source layers and the final norm, on
    the target's device and dtype."""
    check_llama(target)
    sources = shape.sources(target.config.num_hidden_layers)
    tied = bool(getattr(target.config, "tie_word_embeddings", False))
    config = LlamaConfig.from_dict({**target.config.to_dict(), "num_hidden_layers": shape.layers,
                                    "tie_word_embeddings": tied, "architectures": ["LlamaForCausalLM"]})
    config.layer_types = None if getattr(config, "layer_types", None) is None else config.layer_types[:shape.layers]
    with torch.device("meta"):
        draft = LlamaForCausalLM(config)
    base = target.model
    draft.model.embed_tokens = base.embed_tokens
    draft.model.layers = torch.nn.ModuleList(copy.deepcopy(base.layers[i]) for i in sources)
    for i, layer in enumerate(draft.model.layers):
        layer.self_attn.layer_idx = i
    draft.model.norm = copy.deepcopy(base.norm)
    draft.model.rotary_emb = copy.deepcopy(base.rotary_emb)
    draft.lm_head = target.get_output_embeddings()  # the embedding itself when the target ties them
    draft.model.embed_tokens.weight.requires_grad_(False)
    draft.lm_head.weight.requires_grad_(False)
    draft.generation_config = copy.deepcopy(target.generation_config)
    return draft.eval()


def trained(draft: LlamaForCausalLM) -> dict[str, torch.nn.Parameter]:
    """The parameters the training fits: the decoder layers and the final norm (the embedding and
    the output layer it is tied to stay the target's)."""
    return {name: p for name, p in draft.named_parameters()
            if name.startswith(("model.layers.", "model.norm."))}
