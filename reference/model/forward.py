"""One forward pass of a causal LM that also returns the hidden states a drafter asked for.

Without `Needs` the call is the plain one, so the baseline pays nothing. The final hidden
state (what the output layer reads) comes from running the model's decoder and its output
layer as the model's own forward does (`logits = output_layer(hidden[:, -n:])`): no hooks and
no extra work. That split is checked once per model against the plain call; a model whose
forward does more to its logits (a soft cap, a scale), and any request for intermediate
layers, goes through the model's own `output_hidden_states` instead. Nothing is hooked by
this project either way (transformers' `output_hidden_states` records layers with hooks of
its own, which then stay on the model: measured ~1.5% on every later pass of SmolLM2 here).
"""
from __future__ import annotations

from typing import Sequence
from weakref import WeakKeyDictionary

import torch

from specdec.reference.model.placement import input_device, output_device
from specdec.reference.core.seams import NOTHING, Needs
from specdec.errors import SpecdecError
from specdec.reference.model.seq2seq import ModelPass, is_encoder_decoder

_SPLITS: WeakKeyDictionary = WeakKeyDictionary()  # model -> whether decoder + output layer == its forward


@torch.inference_mode()
def forward(model: torch.nn.Module, input_ids: torch.Tensor, n_logits: int, needs: Needs = NOTHING,
            bound: ModelPass | None = None, **kwargs
            ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Run `model` on input_ids [B, T] (extra keyword arguments go to the model: a cache,
    positions, a mask).

    Returns logits [B, n_logits, V] of the last n_logits positions (n_logits = 0: all T),
    the final hidden states [B, T, d] (None unless needs.hidden) and the selected layers'
    hidden states [B, T, L, d] (None unless needs.layers). An encoder-decoder model's decoder
    runs over input_ids with the encoder's outputs of the prompt `bound` holds
    (`specdec.reference.model.seq2seq.ModelPass`)."""
    if is_encoder_decoder(model):
        if bound is None:
            raise SpecdecError(f"{type(model).__name__} is an encoder-decoder model: its decoder needs the encoder's "
                               "outputs")
        out = bound(input_ids, n_logits, output_hidden_states=bool(needs), **kwargs)
        states = out.hidden_states
        layers = torch.stack([states[i] for i in needs.layers], dim=2) if needs.layers else None
        return out.logits, states[-1] if needs.hidden else None, layers
    if not needs:
        return model(input_ids=input_ids, logits_to_keep=n_logits, **kwargs).logits, None, None
    if not needs.layers and split_is_exact(model):
        hidden = model.get_decoder()(input_ids=input_ids, **kwargs).last_hidden_state  # [B, T, d]
        logits = model.get_output_embeddings()(hidden[:, -n_logits:] if n_logits else hidden)
        return logits.to(output_device(model)), hidden, None
    out = model(input_ids=input_ids, logits_to_keep=n_logits, output_hidden_states=True, **kwargs)
    states = out.hidden_states  # (embeddings, after layer 1, ..., after the last layer and the final norm)
    last = states[-1].device  # a model split over devices: gather the layers where the output is
    layers = torch.stack([states[i].to(last) for i in needs.layers], dim=2) if needs.layers else None
    return out.logits, states[-1] if needs.hidden else None, layers


def split_is_exact(model: torch.nn.Module) -> bool:
    """Whether the model's logits are its output layer applied to its decoder's last hidden state
    (checked once, on two tokens, against the plain call)."""
    if model not in _SPLITS:
        try:
            ids = torch.zeros((1, 2), dtype=torch.long, device=input_device(model))
            hidden = model.get_decoder()(input_ids=ids).last_hidden_state
            split = model.get_output_embeddings()(hidden).to(output_device(model))
            plain = model(input_ids=ids).logits
            _SPLITS[model] = split.shape == plain.shape and bool(torch.allclose(split, plain, rtol=1e-4, atol=1e-4))
        except (AttributeError, NotImplementedError, ValueError, TypeError):  # no decoder to call on its own
            _SPLITS[model] = False
    return _SPLITS[model]


@torch.inference_mode()
def branch_logits(model: torch.nn.Module, sequence: Sequence[int], starts: Sequence[int], tokens: Sequence[int]
                  ) -> torch.Tensor | None:
    """Logits [R, V] of a causal LM right after tokens[r] placed at position starts[r] of `sequence`
    (its prefix sequence[:starts[r]], starts[r] <= len(sequence)): one pass over the prefix shared by
    all and the R tokens, each attending to its own prefix and itself (a 4D mask, as a token tree:
    like the decoder's trees it needs an attention that honours one, eager or sdpa; tests check it
    against a forward over each prefix). None for an encoder-decoder (its decoder takes no 4D mask here)."""
    if is_encoder_decoder(model):
        return None
    s, r = max(int(x) for x in starts), len(tokens)
    ids = torch.tensor([list(sequence[:s]) + [int(x) for x in tokens]], device=input_device(model))
    allowed = torch.zeros(s + r, s + r, dtype=torch.bool)
    allowed[:s, :s] = torch.ones(s, s, dtype=torch.bool).tril()
    for j, start in enumerate(starts):
        allowed[s + j, :int(start)] = True
        allowed[s + j, s + j] = True
    dtype = next((w.dtype for w in model.parameters() if w.is_floating_point()), torch.float32)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    positions = torch.tensor([list(range(s)) + [int(x) for x in starts]], device=ids.device)
    out = model(input_ids=ids, attention_mask=mask[None, None].to(ids.device), position_ids=positions,
                logits_to_keep=r, use_cache=False)
    return out.logits[0, -r:]
