"""A causal LM with its KV cache, following one growing and shrinking token sequence.

Both the target scorer and the neural drafter are built on this: the session stores the
sequence `tokens`, of which the first `n_cached` are in the KV cache; the rest are
*pending* and are fed with the next forward pass. Rolling back after a rejection crops
the cache; the prefix is never re-encoded.
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec.reference.core.placement import input_device, output_device


class KVSession:
    """One sequence decoded by `model` with a KV cache (batch size 1)."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.device = input_device(model)  # where input ids go
        self.output_device = output_device(model)  # where the logits come out (differs in a split model)
        self.tokens: list[int] = []
        self.n_cached = 0
        self.cache: DynamicCache | None = None
        self.forward_passes = 0
        self._tree: list[int] = []  # tokens of the tree in the cache beyond the sequence, if any

    def start(self, prompt: Sequence[int], encode: bool = True) -> None:
        """Reset to `prompt` and encode all but its last token (which stays pending); with
        encode=False nothing is encoded yet: the whole prompt is pending and goes with the
        next `extend`, in the same forward pass as the tokens appended to it."""
        if len(prompt) == 0:
            raise ValueError("the prompt must contain at least one token")
        self.tokens = [int(t) for t in prompt]
        self.n_cached = 0
        self.cache = DynamicCache(config=self.model.config)
        if encode and len(self.tokens) > 1:
            self._forward(self.tokens[:-1], logits_to_keep=1)
            self.n_cached = len(self.tokens) - 1

    @torch.inference_mode()
    def _forward(self, ids: list[int], logits_to_keep: int) -> torch.Tensor:
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        out = self.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                         logits_to_keep=logits_to_keep)
        self.forward_passes += 1
        return out.logits[0]  # [logits_to_keep, vocab]

    def extend(self, new: Sequence[int], n_logits: int) -> torch.Tensor:
        """Append `new` tokens and run one forward pass over everything pending.

        Returns the logits of the last `n_logits` positions, [n_logits, vocab]: row i
        predicts the token after position len(tokens) - n_logits + i.
        """
        self.tokens.extend(int(t) for t in new)
        pending = self.tokens[self.n_cached:]
        if not pending:
            raise ValueError("nothing to feed: the whole sequence is already cached")
        if n_logits > len(pending):
            raise ValueError(f"asked for {n_logits} logits but only {len(pending)} tokens are pending")
        logits = self._forward(pending, logits_to_keep=n_logits)
        self.n_cached = len(self.tokens)
        return logits

    @torch.inference_mode()
    def extend_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> torch.Tensor:
        """One pass over everything pending plus a token tree hanging off the last pending token
        (`specdec.reference.core.tree`). Returns logits [1 + N, vocab]: row 0 predicts the token
        after the pending ones, row 1 + i the token after tree node i. The cache then holds the
        nodes too, until `keep_tree_path` keeps one path of them."""
        from specdec.reference.core.tree import tree_inputs

        pending = self.tokens[self.n_cached:]
        if not pending:
            raise ValueError("nothing to feed: the whole sequence is already cached")
        dtype = next(self.model.parameters()).dtype
        positions, mask = tree_inputs(self.n_cached, len(pending), parents, dtype, self.device)
        ids = torch.tensor([pending + [int(t) for t in tokens]], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True, position_ids=positions,
                         attention_mask=mask, logits_to_keep=len(tokens) + 1)
        self.forward_passes += 1
        self.n_cached = len(self.tokens)
        self._tree = [int(t) for t in tokens]
        return out.logits[0]

    def keep_tree_path(self, nodes: Sequence[int]) -> None:
        """Keep the cache entries of the tree nodes `nodes` (a root-to-node path, in order), drop
        the other nodes', and append the path's tokens to the sequence."""
        base = self.n_cached
        keep = torch.tensor(list(range(base)) + [base + i for i in nodes])
        for layer in self.cache.layers:  # each layer's cache lives on its layer's device
            layer.keys = layer.keys.index_select(-2, keep.to(layer.keys.device))
            layer.values = layer.values.index_select(-2, keep.to(layer.values.device))
        self.tokens.extend(self._tree[i] for i in nodes)
        self.n_cached = len(self.tokens)
        self._tree = []

    def truncate(self, length: int) -> None:
        """Keep the first `length` tokens of the sequence; crop the KV cache to match."""
        if length > len(self.tokens):
            raise ValueError(f"cannot truncate a {len(self.tokens)}-token sequence to {length}")
        del self.tokens[length:]
        if length < self.n_cached:
            self.cache.crop(length - self.n_cached)  # transformers 5: negative = tokens to drop
            self.n_cached = length

    def append(self, new: Sequence[int]) -> None:
        """Append tokens without running the model (they stay pending)."""
        self.tokens.extend(int(t) for t in new)
