"""A KV cache for B sequences of different lengths that each grow and shrink on their own.

transformers' caches crop every row of a batch by the same count, so a batch whose rows
accept different numbers of drafts cannot share one. Here every sequence owns a *slot*: a
run of cache positions in one preallocated buffer per layer, [rows, heads, capacity, d].
A pass writes each fed token's keys and values at its slot's next free positions
(`scatter_`, no copy of the cache) and attends through a mask that shows each query its own
slot's entries up to itself; rolling back after a rejection only lowers the slot's length
(the stale entries are never visible and are overwritten by the next pass). A slot's feed may end
in a token tree (`specdec.reference.core.tree`): its nodes are written after the slot's pending
tokens, each at the position of its depth and seeing only its ancestors among them; keeping the
accepted path moves its entries to follow the committed ones (`keep_path`).

Two layouts of the same slots (which is faster: docs/batching.md):
- padded: slot i is buffer row i; a pass feeds [B, T] tokens, every row right-padded to the
  longest row's T (padding positions compute, write past the slot's length and are ignored);
- packed: one buffer row with the slots end to end; a pass feeds [1, sum of rows' tokens],
  no padding, each query attending over the whole buffer under the mask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from specdec.reference.core.tree import ancestry, depths

LAYOUTS = ("padded", "packed")


@dataclass
class PassLayout:
    """Where the tokens of one pass go: input_ids, position_ids, write positions [Bq, T], the
    additive attention mask [Bq, 1, T, used] and, per sequence, (buffer row, first column) of
    its tokens in the [Bq, T] grid with their count."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    write: torch.Tensor
    mask: torch.Tensor
    places: list[tuple[int, int, int]]


class RaggedLayer(CacheLayerMixin):
    """One decoder layer's keys and values in the slots of a `RaggedCache`."""

    is_croppable = False

    def __init__(self, owner: "RaggedCache") -> None:
        super().__init__()
        self.owner = owner

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        shape = (self.owner.buffer_rows, key_states.shape[1], self.owner.buffer_length, key_states.shape[-1])
        self.keys = key_states.new_zeros(shape)
        self.values = value_states.new_zeros(shape[:3] + (value_states.shape[-1],))
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        write = self.owner.write.to(key_states.device)[:, None, :, None]  # [Bq, 1, T, 1]
        self.keys.scatter_(2, write.expand(-1, key_states.shape[1], -1, key_states.shape[-1]), key_states)
        self.values.scatter_(2, write.expand(-1, value_states.shape[1], -1, value_states.shape[-1]), value_states)
        used = self.owner.used
        return self.keys[:, :, :used], self.values[:, :, :used]

    def store(self, row: int, start: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Copy a sequence's keys/values [heads, n, d] into buffer row `row` from column `start`."""
        if not self.is_initialized:
            self.lazy_initialization(keys[None], values[None])
        n = keys.shape[-2]
        self.keys[row, :, start:start + n] = keys.to(self.keys.device)
        self.values[row, :, start:start + n] = values.to(self.values.device)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.owner.used, 0

    def get_seq_length(self) -> int:
        return self.owner.used

    def get_max_length(self) -> int:
        return self.owner.buffer_length


class RaggedCache(Cache):
    """`rows` slots of `capacity` positions each; lengths[i] = cached tokens of slot i."""

    def __init__(self, n_layers: int, rows: int, capacity: int, layout: str = "padded") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if rows < 1 or capacity < 2:
            raise ValueError(f"need rows >= 1 and capacity >= 2, got {rows}, {capacity}")
        self.rows, self.capacity, self.layout = rows, capacity, layout
        self.buffer_rows = rows if layout == "padded" else 1
        self.buffer_length = capacity if layout == "padded" else rows * capacity
        self.lengths = [0] * rows
        self.write = torch.zeros(1, 1, dtype=torch.long)
        self.used = 0
        super().__init__(layers=[RaggedLayer(self) for _ in range(n_layers)])

    def _where(self, slot: int) -> tuple[int, int]:
        """(buffer row, first column) of a slot."""
        return (slot, 0) if self.layout == "padded" else (0, slot * self.capacity)

    def store(self, slot: int, per_layer: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Make slot `slot` hold a sequence encoded elsewhere: per layer its keys and values
        [heads, n, d] (e.g. a batch-1 prefill's cache)."""
        n = per_layer[0][0].shape[-2]
        if n > self.capacity:
            raise ValueError(f"{n} cached tokens do not fit a slot of {self.capacity}")
        row, start = self._where(slot)
        for layer, (keys, values) in zip(self.layers, per_layer):
            layer.store(row, start, keys, values)
        self.lengths[slot] = n

    def layout_pass(self, feeds: Sequence[Sequence[int]], dtype: torch.dtype, device: torch.device,
                    trees: Sequence[Sequence[int] | None] | None = None) -> PassLayout:
        """Arrange one pass: feeds[i] = the tokens slot i appends (may be empty: the slot sits out
        in the packed layout and is padding in the padded one); trees[i]: the parents of a token
        tree that ends feeds[i] (None: a chain). Sets the write positions the layers use; the
        slots' lengths are set by the caller after the pass."""
        if len(feeds) != self.rows:
            raise ValueError(f"one feed per slot: got {len(feeds)} for {self.rows}")
        width = max(len(f) for f in feeds)
        if width == 0:
            raise ValueError("nothing to feed: every slot's feed is empty")
        for i, feed in enumerate(feeds):  # padded: every row writes `width` positions
            if self.lengths[i] + (width if self.layout == "padded" else len(feed)) > self.capacity:
                raise ValueError(f"slot {i}: {self.lengths[i]} cached + {width} fed tokens exceed its capacity "
                                 f"{self.capacity}")
        if self.layout == "padded":
            ids = [list(f) + [0] * (width - len(f)) for f in feeds]
            local = torch.arange(width)
            starts = torch.tensor(self.lengths)[:, None]
            positions = starts + local  # [B, T]; padding continues the row's positions (its writes go unseen)
            write = positions
            lo, hi = torch.zeros_like(positions), positions
            places = [(i, 0, len(f)) for i, f in enumerate(feeds)]
        else:
            ids, pos, wr, lo_, hi_, places = [], [], [], [], [], []
            for i, feed in enumerate(feeds):
                base = i * self.capacity
                places.append((0, len(ids), len(feed)))
                for j, token in enumerate(feed):
                    ids.append(int(token))
                    pos.append(self.lengths[i] + j)
                    wr.append(base + self.lengths[i] + j)
                    lo_.append(base)
                    hi_.append(base + self.lengths[i] + j)
            ids = [ids]
            positions, write = torch.tensor([pos]), torch.tensor([wr])
            lo, hi = torch.tensor([lo_]), torch.tensor([hi_])
        self.write = write
        self.used = int(write.max()) + 1
        keys = torch.arange(self.used)
        visible = (keys >= lo[..., None]) & (keys <= hi[..., None])  # [Bq, T, used]
        if trees is not None and any(trees):
            positions = positions.clone()  # the padded layout's write positions stay sequential
            for (row, col, count), parents in zip(places, trees):
                if parents:
                    n = len(parents)
                    first, key = col + count - n, int(write[row, col + count - n])  # the tree's first node
                    visible[row, first:first + n, key:key + n] = ancestry(parents)
                    positions[row, first:first + n] = positions[row, first - 1] + torch.tensor(depths(parents))
        mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, torch.finfo(dtype).min)
        return PassLayout(torch.tensor(ids, dtype=torch.long, device=device), positions.to(device), write,
                          mask[:, None].to(device), places)

    @torch.inference_mode()
    def keep_path(self, slot: int, base: int, nodes: Sequence[int]) -> None:
        """After a tree pass written from position `base` of slot `slot`: its entries at base +
        nodes[j] (a root-to-node path, in order) move to base + j, and the slot keeps base +
        len(nodes) entries."""
        row, start = self._where(slot)
        src = torch.tensor([start + base + int(i) for i in nodes], dtype=torch.long)
        dst = torch.arange(start + base, start + base + len(nodes))
        for layer in self.layers:
            if layer.is_initialized and len(nodes):
                layer.keys[row, :, dst.to(layer.keys.device)] = layer.keys[row, :, src.to(layer.keys.device)]
                layer.values[row, :, dst.to(layer.values.device)] = layer.values[row, :, src.to(layer.values.device)]
        self.set_length(slot, base + len(nodes))

    def set_length(self, slot: int, length: int) -> None:
        """Slot `slot` now holds its first `length` entries (a rollback, or the fed tokens kept)."""
        if not 0 <= length <= self.capacity:
            raise ValueError(f"slot length {length} outside 0..{self.capacity}")
        self.lengths[slot] = length
