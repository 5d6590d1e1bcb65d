"""A language model with its KV cache, following one growing and shrinking token sequence.

Both the target scorer and the neural drafter are built on this: the session stores the
sequence `tokens`, of which the first `n_cached` are in the KV cache; the rest are
*pending* and are fed with the next forward pass. Rolling back after a rejection crops
the cache; the prefix is never re-encoded. An encoder-decoder model's sequence is its
decoder's: `start` binds the model to the prompt (`ModelPass`: an encoder-decoder's encoder runs
once over the prompt's source) and every pass goes through that binding (`specdec.reference.model.seq2seq`).
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import PreTrainedModel

from specdec.errors import SpecdecError
from specdec.reference.model.forward import forward
from specdec.reference.model.placement import input_device, output_device
from specdec.reference.core.seams import NOTHING, Needs, Scored, Verdict
from specdec.reference.model.seq2seq import ModelPass, new_cache, self_attention, with_cache
from specdec.reference.core.tree import tree_inputs


class KVSession:
    """One sequence decoded by `model` with a KV cache (batch size 1)."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.device = input_device(model)  # where input ids go
        self.output_device = output_device(model)  # where the logits come out (differs in a split model)
        self.tokens: list[int] = []
        self.committed = 0  # tokens of the sequence the decoder has emitted (prompt included); the rest are drafts
        self.n_cached = 0
        self.cache = None  # a transformers Cache (new_cache)
        self.bound: ModelPass | None = None  # the model bound to this sequence's prompt (its encoder's outputs)
        self.forward_passes = 0
        self.tree_nodes = 0  # nodes of a token tree the cache holds past the sequence (until keep_tree_path)

    def start(self, prompt: Sequence[int], encode: bool = True, needs: Needs = NOTHING) -> Scored | None:
        """Reset to `prompt` and encode all but its last token (which stays pending); with
        encode=False nothing is encoded yet: the whole prompt is pending and goes with the
        next `extend`, in the same forward pass as the tokens appended to it.

        Returns the encoding pass (one row of logits: the prompt's last token; hidden states
        as `needs` asks), or None when nothing was encoded."""
        if len(prompt) == 0:
            raise SpecdecError("the prompt must contain at least one token")
        self.tokens = [int(t) for t in prompt]
        self.committed = len(self.tokens)
        self.n_cached = 0
        self.tree_nodes = 0
        self.cache = new_cache(self.model)
        self.bound = ModelPass(self.model, [prompt])
        if not encode or len(self.tokens) < 2:
            return None
        scored = self._forward(self.tokens[:-1], 1, needs)
        self.n_cached = len(self.tokens) - 1
        return scored

    def _forward(self, ids: list[int], n_logits: int, needs: Needs, **kwargs) -> Scored:
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        logits, hidden, layers = forward(self.model, input_ids, n_logits, needs, self.bound,
                                         **with_cache(self.model, self.cache), **kwargs)
        self.forward_passes += 1
        return Scored(logits[0], None if hidden is None else hidden[0], None if layers is None else layers[0])

    def extend(self, new: Sequence[int], n_logits: int, needs: Needs = NOTHING) -> Scored:
        """Append `new` tokens and run one forward pass over everything pending.

        Returns the pass: logits of the last `n_logits` positions, [n_logits, vocab] (row i
        predicts the token after position len(tokens) - n_logits + i), and the hidden states
        of every pending position fed when `needs` asks for them.
        """
        self.tokens.extend(int(t) for t in new)
        pending = self.tokens[self.n_cached:]
        if not pending:
            raise ValueError("nothing to feed: the whole sequence is already cached")
        if n_logits > len(pending):
            raise ValueError(f"asked for {n_logits} logits but only {len(pending)} tokens are pending")
        scored = self._forward(pending, n_logits, needs)
        self.n_cached = len(self.tokens)
        return scored

    def extend_tree(self, tokens: Sequence[int], parents: Sequence[int], needs: Needs = NOTHING) -> Scored:
        """One pass over everything pending plus a token tree hanging off the last pending token
        (`specdec.reference.core.tree`). Returns logits [1 + N, vocab]: row 0 predicts the token
        after the pending ones, row 1 + i the token after tree node i (and the hidden states of
        every position fed, as `needs` asks). The cache then holds the nodes too, past the
        sequence, until `keep_tree_path` keeps one path of them."""
        pending = self.tokens[self.n_cached:]
        if not pending:
            raise ValueError("nothing to feed: the whole sequence is already cached")
        dtype = next(self.model.parameters()).dtype
        positions, mask = tree_inputs(self.n_cached, len(pending), parents, dtype, self.device)
        scored = self._forward(pending + [int(t) for t in tokens], len(tokens) + 1, needs, position_ids=positions,
                               attention_mask=mask)
        self.n_cached = len(self.tokens)
        self.tree_nodes = len(tokens)
        return scored

    def keep_tree_path(self, nodes: Sequence[int], tokens: Sequence[int]) -> None:
        """Keep the cache entries of the tree nodes `nodes` (a root-to-node path, in order) whose
        tokens are `tokens`, drop the other nodes', and append the path's tokens to the sequence."""
        if len(nodes) != len(tokens):
            raise ValueError(f"{len(nodes)} path nodes but {len(tokens)} tokens")
        base = self.n_cached
        keep = torch.tensor(list(range(base)) + [base + i for i in nodes])
        for layer in self_attention(self.cache).layers:  # each layer's cache lives on its layer's device
            layer.keys = layer.keys.index_select(-2, keep.to(layer.keys.device))
            layer.values = layer.values.index_select(-2, keep.to(layer.values.device))
        self.tokens.extend(int(t) for t in tokens)
        self.n_cached = len(self.tokens)
        self.tree_nodes = 0

    def commit(self, verdict: Verdict) -> None:
        """The decoder emitted verdict.tokens: keep the committed sequence and the accepted drafts
        the session holds (a tree pass: the verdict's path), drop the other drafts, append the rest
        of the verdict (pending)."""
        tokens = verdict.tokens.tolist()
        n = verdict.n_accepted
        if self.tree_nodes:  # the pass was a tree: keep the accepted path's entries
            if verdict.path is None:
                raise ValueError("a tree pass needs a verdict naming its accepted path")
            self.keep_tree_path(verdict.path, tokens[:n])
            keep = self.committed + n
        else:
            keep = min(self.committed + n, len(self.tokens))  # a drafter may not have fed its last draft
            self.truncate(keep)
        self.append(tokens[keep - self.committed:])
        self.committed += len(tokens)

    def truncate(self, length: int) -> None:
        """Keep the first `length` tokens of the sequence; crop the KV cache to match."""
        if self.tree_nodes:
            raise ValueError("the cache holds a token tree: keep one of its paths (keep_tree_path) first")
        if length > len(self.tokens):
            raise ValueError(f"cannot truncate a {len(self.tokens)}-token sequence to {length}")
        del self.tokens[length:]
        if length < self.n_cached:
            self.cache.crop(length - self.n_cached)  # transformers 5: negative = tokens to drop
            self.n_cached = length

    def rewind(self, length: int) -> None:
        """Back to the first `length` tokens of the committed sequence, the last of them pending
        (as `start` left it, without encoding anything again)."""
        if not 1 <= length <= self.committed or self.tree_nodes:
            raise ValueError(f"cannot rewind a {self.committed}-token sequence to {length}")
        last = self.tokens[length - 1]
        self.truncate(length - 1)
        self.append([last])
        self.committed = length

    def append(self, new: Sequence[int]) -> None:
        """Append tokens without running the model (they stay pending)."""
        self.tokens.extend(int(t) for t in new)
