"""One forward pass of a causal LM that also returns the hidden states a drafter asked for.

The hidden states come from the model's own output (`output_hidden_states`), so they are
exactly what its output layer read; nothing is hooked. Without `Needs` the call is the plain
one, so the baseline pays nothing.
"""
from __future__ import annotations

import torch

from specdec.reference.core.seams import NOTHING, Needs


@torch.inference_mode()
def forward(model: torch.nn.Module, input_ids: torch.Tensor, n_logits: int, needs: Needs = NOTHING, **kwargs
            ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Run `model` on input_ids [B, T] (extra keyword arguments go to the model: a cache,
    positions, a mask).

    Returns logits [B, n_logits, V] of the last n_logits positions (n_logits = 0: all T),
    the final hidden states [B, T, d] (None unless needs.hidden) and the selected layers'
    hidden states [B, T, L, d] (None unless needs.layers)."""
    if not needs:
        return model(input_ids=input_ids, logits_to_keep=n_logits, **kwargs).logits, None, None
    out = model(input_ids=input_ids, logits_to_keep=n_logits, output_hidden_states=True, **kwargs)
    states = out.hidden_states  # (embeddings, after layer 1, ..., after the last layer and the final norm)
    hidden = states[-1] if needs.hidden else None
    last = states[-1].device  # a model split over devices: gather the layers where the output is
    layers = torch.stack([states[i].to(last) for i in needs.layers], dim=2) if needs.layers else None
    return out.logits, hidden, layers
