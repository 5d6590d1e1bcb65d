"""Encoder-decoder models (T5, BART/Marian, Whisper) behind the causal-LM call the decoder uses.

For an encoder-decoder pair the sequence that speculative decoding extends is the *decoder's*:
a prompt is a `TokenPrompt` (`specdec.reference.core.prompt`): the decoder's prefix ids (usually
just its start token) with the encoder's input (`source`: token ids, or precomputed features
such as Whisper's log-mel frames). Everything above the scorer seam sees only the ids, so
drafters, the verifier, the statistics and the estimator work unchanged, and nothing there asks
which kind a model is. Below it, `ModelPass` is the one adapter: bound to a batch of prompts, it
runs each model's encoder once over their sources and calls the decoder with the encoder's
outputs (a causal LM: the model itself);
the self-attention cache grows and is cropped as a causal LM's does, while the
cross-attention keys and values are computed on the first pass and reused
(`EncoderDecoderCache`). Token trees (4-D masks over the decoder) are not supported here.
How to run a real pair: docs/encoder-decoder.md.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.model.model_files import folder_is_encoder_decoder  # noqa: F401 (re-exported)
from specdec.reference.core.prompt import TokenPrompt


def is_encoder_decoder(model: Any) -> bool:
    """Whether `model` (a module, or its config) is an encoder-decoder."""
    config = getattr(model, "config", model)
    return bool(getattr(config, "is_encoder_decoder", False))


def decoder_start(model: torch.nn.Module) -> list[int]:
    """The decoder's prefix: its start token (generation config first, then the model config)."""
    for config in (getattr(model, "generation_config", None), model.config):
        start = getattr(config, "decoder_start_token_id", None)
        if isinstance(start, int):
            return [start]
    raise SpecdecError(f"{type(model).__name__} names no decoder_start_token_id in its config")


def text_prompts(model: torch.nn.Module, tokenizer, prompts: Sequence[Sequence[int]]) -> list[TokenPrompt]:
    """Encoder-decoder prompts from token ids of texts: each text (with the tokenizer's special
    tokens, e.g. T5's closing </s>) goes to the encoder; the decoder starts from its start token."""
    if getattr(model, "main_input_name", "input_ids") != "input_ids":
        raise SpecdecError(f"{type(model).__name__}'s encoder reads {model.main_input_name}, not text: give "
                           "--encoder-inputs FILE (features, .npy or .pt)")
    start = decoder_start(model)
    build = getattr(tokenizer, "build_inputs_with_special_tokens", None)
    return [TokenPrompt(start, {"input_ids": torch.tensor(build(list(p)) if build else list(p))}) for p in prompts]


@dataclass
class EncoderState:
    """The encoder's outputs for a batch, and its attention mask (None: no padding)."""

    outputs: Any  # a transformers BaseModelOutput
    mask: torch.Tensor | None

    def rows(self, n: int) -> "EncoderState":
        """The state repeated to n rows when it holds one (a single prompt timed in a batch)."""
        hidden = self.outputs.last_hidden_state
        if hidden.shape[0] == n:
            return self
        if hidden.shape[0] != 1:
            raise ValueError(f"an encoder state of {hidden.shape[0]} rows cannot serve {n}")
        outputs = type(self.outputs)(last_hidden_state=hidden.expand(n, -1, -1))
        return EncoderState(outputs, None if self.mask is None else self.mask.expand(n, -1))


@torch.inference_mode()
def encode(model: torch.nn.Module, prompts: Sequence[Sequence[int]]) -> EncoderState:
    """Run `model`'s encoder once over the sources of `prompts` (right-padded token ids with a
    mask, or stacked features of one shape)."""
    from specdec.reference.model.placement import input_device

    sources = [getattr(p, "source", None) for p in prompts]
    if any(s is None for s in sources):
        raise SpecdecError(f"{type(model).__name__} is an encoder-decoder model: each prompt needs the encoder's "
                           "input (text, or --encoder-inputs for feature encoders)")
    device = input_device(model)
    name = next(iter(sources[0]))
    if name == "input_ids":
        width = max(len(s["input_ids"]) for s in sources)
        pad = getattr(model.config, "pad_token_id", None) or 0
        ids = torch.full((len(sources), width), pad, dtype=torch.long)
        mask = torch.zeros((len(sources), width), dtype=torch.long)
        for b, s in enumerate(sources):
            ids[b, :len(s["input_ids"])] = s["input_ids"]
            mask[b, :len(s["input_ids"])] = 1
        ids, mask = ids.to(device), mask.to(device)
        return EncoderState(model.get_encoder()(input_ids=ids, attention_mask=mask), mask)
    shapes = {tuple(s[name].shape) for s in sources}
    if len(shapes) != 1:
        raise SpecdecError(f"encoder inputs of different shapes in one batch: {sorted(shapes)}")
    dtype = next(model.parameters()).dtype
    features = torch.stack([s[name] for s in sources]).to(device=device, dtype=dtype)
    return EncoderState(model.get_encoder()(**{name: features}), None)


def new_cache(model: torch.nn.Module):
    """An empty KV cache for `model` (self- and cross-attention for an encoder-decoder)."""
    from transformers import DynamicCache, EncoderDecoderCache

    if is_encoder_decoder(model):
        return EncoderDecoderCache(DynamicCache(), DynamicCache())
    return DynamicCache(config=model.config)


def with_cache(model: torch.nn.Module, cache) -> dict[str, Any]:
    """The keyword arguments that make `model`'s forward read and extend `cache`: transformers
    renamed the argument `past_key_values` to `cache` (5.24 warns that the old name goes in
    5.40); the name is read from the model's own forward (a wrapper whose forward takes only
    **kwargs gets the installed transformers' name), so either release works silently."""
    return {_cache_keyword(type(model)): cache, "use_cache": True}


@functools.cache
def _cache_keyword(cls: type) -> str:
    parameters = inspect.signature(cls.forward).parameters  # follows the deprecation wrapper's __wrapped__
    if "cache" in parameters or "past_key_values" in parameters:
        return "cache" if "cache" in parameters else "past_key_values"
    from transformers import LlamaForCausalLM  # a **kwargs wrapper: what the library's own models take

    return _cache_keyword(LlamaForCausalLM)


def self_attention(cache):
    """The part of a cache that holds the sequence's own keys and values."""
    return getattr(cache, "self_attention_cache", cache)


@dataclass
class DecoderOutput:
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None


def run_model(model: torch.nn.Module, input_ids: torch.Tensor, encoder: EncoderState | None = None,
              logits_to_keep: int = 0, attention_mask: torch.Tensor | None = None, **kwargs):
    """The model's forward over `input_ids` [B, T], for either kind of model: a causal LM as
    `model(input_ids=...)`; an encoder-decoder's decoder with `encoder`'s outputs (decoder
    attention_mask 2-D only; positions follow the cache). Returns an object with `.logits`
    (the last logits_to_keep positions; 0 = all) and `.hidden_states` when asked for."""
    if not is_encoder_decoder(model):
        return model(input_ids=input_ids, logits_to_keep=logits_to_keep, attention_mask=attention_mask, **kwargs)
    if encoder is None:
        raise SpecdecError(f"{type(model).__name__} is an encoder-decoder model: its decoder needs the encoder's "
                           "outputs")
    if "position_ids" in kwargs or (attention_mask is not None and attention_mask.dim() != 2):
        raise SpecdecError("token trees (custom positions and masks) are not supported on encoder-decoder models")
    state = encoder.rows(input_ids.shape[0])
    out = model(decoder_input_ids=input_ids, decoder_attention_mask=attention_mask, encoder_outputs=state.outputs,
                attention_mask=state.mask, **kwargs)
    logits = out.logits[:, -logits_to_keep:] if logits_to_keep else out.logits
    hidden = out.decoder_hidden_states if kwargs.get("output_hidden_states") else None
    return DecoderOutput(logits, hidden)


class ModelPass:
    """`model`'s forward for a batch of prompts, whichever kind the model is: the model adapter
    below the scorer seam. Built once per batch (an encoder-decoder's encoder runs here, once over
    the prompts' sources); each call runs the decoder side over input_ids [B, T] (B = len(prompts),
    or any B when one prompt is bound: its encoder outputs are repeated).

    Call: `run_model`'s arguments without the model and the encoder."""

    def __init__(self, model: torch.nn.Module, prompts: Sequence[Sequence[int]]) -> None:
        self.model = model
        self.encoder: EncoderState | None = encode(model, prompts) if is_encoder_decoder(model) else None

    def __call__(self, input_ids: torch.Tensor, logits_to_keep: int = 0, attention_mask: torch.Tensor | None = None,
                 **kwargs):
        return run_model(self.model, input_ids, self.encoder, logits_to_keep, attention_mask, **kwargs)
