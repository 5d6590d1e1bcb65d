"""Self-distillation data for the heads: the target's last hidden states and its own next-token
distributions on token windows, one batched teacher-forced pass per batch of windows.

Head i at position t learns p(. | x_<=t+i), the target's distribution at position t + i, so
the labels are what the target predicts, not the corpus (acceptance is against the target).
Only the top `top_k` of each distribution are kept (float16 probabilities + ids).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.model.forward import forward
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.seams import Needs


@dataclass
class Distillation:
    """tokens: int64 [W, L]; hidden: float32 [W, L, d]; top_ids: int32 [W, L, k]; top_probs:
    float16 [W, L, k] — window w, position t: the token, the target's final hidden state
    there and the top-k of p(. | x_<=t); layers: float32 [W, L, n, d], the hidden states after
    the decoder layers `layer_ids` (the model's `hidden_states` indices), or None."""

    tokens: torch.Tensor
    hidden: torch.Tensor
    top_ids: torch.Tensor
    top_probs: torch.Tensor
    layers: torch.Tensor | None = None
    layer_ids: tuple[int, ...] = ()

    @property
    def n_windows(self) -> int:
        return int(self.hidden.shape[0])

    def split(self, held_out: float, generator: torch.Generator) -> tuple["Distillation", "Distillation"]:
        """(train, held-out) by whole windows, held_out the fraction held out (at least one window)."""
        order = torch.randperm(self.n_windows, generator=generator)
        n_held = max(1, int(round(held_out * self.n_windows)))
        if n_held >= self.n_windows:
            raise SpecdecError(f"need more than {n_held} windows to hold some out, got {self.n_windows}")
        return self.select(order[n_held:]), self.select(order[:n_held])

    def select(self, windows: torch.Tensor) -> "Distillation":
        return Distillation(self.tokens[windows], self.hidden[windows], self.top_ids[windows], self.top_probs[windows],
                            None if self.layers is None else self.layers[windows], self.layer_ids)

    def with_layers(self, layer_ids: Sequence[int]) -> "Distillation":
        """The same windows with only `layer_ids` of the stored layers (which must hold them)."""
        layer_ids = tuple(layer_ids)
        if not layer_ids:
            return Distillation(self.tokens, self.hidden, self.top_ids, self.top_probs)
        if not set(layer_ids) <= set(self.layer_ids):
            raise ValueError(f"layers {layer_ids} are not all among the stored {self.layer_ids}")
        pick = torch.tensor([self.layer_ids.index(i) for i in layer_ids])
        return Distillation(self.tokens, self.hidden, self.top_ids, self.top_probs, self.layers[:, :, pick], layer_ids)


def windows(sequences: Sequence[Sequence[int]], length: int) -> list[list[int]]:
    """Cut token sequences into non-overlapping windows of exactly `length` ids (tails dropped)."""
    if length < 2:
        raise SpecdecError(f"window length must be >= 2, got {length}")
    return [list(s[i:i + length]) for s in sequences for i in range(0, len(s) - length + 1, length)]


def tail_windows(sequences: Sequence[Sequence[int]], length: int) -> list[list[int]]:
    """The last `length` ids of each sequence at least that long (a prompt's tail and the answer
    after it; shorter sequences are dropped)."""
    if length < 2:
        raise SpecdecError(f"window length must be >= 2, got {length}")
    return [list(s[len(s) - length:]) for s in sequences if len(s) >= length]


@torch.inference_mode()
def distill(model: torch.nn.Module, token_windows: Sequence[Sequence[int]], top_k: int = 16, batch_size: int = 8,
            progress: bool = False, layer_ids: Sequence[int] = ()) -> Distillation:
    """Teacher-force the target over equal-length windows; keep hidden states (the final ones and
    those after the decoder layers `layer_ids`) and top-k of p (temperature 1, the unadjusted
    distribution)."""
    if not token_windows:
        raise SpecdecError("no windows to distil (the text is shorter than one window)")
    length = len(token_windows[0])
    if any(len(w) != length for w in token_windows):
        raise ValueError("all windows must have the same length")
    n = len(token_windows)
    out: dict[str, torch.Tensor | None] = {}
    needs = Needs(hidden=True, layers=tuple(layer_ids))
    bar = progress_bar(n * length, "target passes over the training text", "tok", progress)
    try:
        for b in range(0, n, batch_size):
            batch = torch.tensor(token_windows[b:b + batch_size], dtype=torch.long, device=model.device)
            logits, states, selected = forward(model, batch, 0, needs)  # [B, L, V], [B, L, d], [B, L, n, d]
            top = logits.float().log_softmax(-1).topk(top_k, dim=-1)
            if not out:  # the outputs allocated once: kept per batch, they interleave with each pass's
                # transient tensors and the allocator's heap grew ~200 KB a token (24 GB at 98,304 tokens)
                out = {"hidden": torch.empty(n, length, states.shape[-1]),
                       "ids": torch.empty(n, length, top_k, dtype=torch.int32),
                       "probs": torch.empty(n, length, top_k, dtype=torch.float16),
                       "layers": None if selected is None else torch.empty(n, length, *selected.shape[-2:])}
            rows = slice(b, b + len(batch))
            out["hidden"][rows] = states  # assignment converts dtype and device
            if selected is not None:
                out["layers"][rows] = selected
            out["ids"][rows] = top.indices
            out["probs"][rows] = top.values.exp()
            bar.update(batch.numel())
    finally:
        bar.close()
    return Distillation(torch.tensor([list(w) for w in token_windows], dtype=torch.long), out["hidden"],
                        out["ids"], out["probs"], out["layers"], tuple(layer_ids))


def frequent_vocab(data: Distillation, size: int, always: Sequence[int] = ()) -> torch.Tensor:
    """The `size` ids with the most target probability mass in the data (plus `always`, e.g.
    EOS), sorted: int64 [<= size + len(always)]."""
    mass = torch.zeros(int(data.top_ids.max()) + 1, dtype=torch.float64)
    mass.index_add_(0, data.top_ids.reshape(-1).long(), data.top_probs.reshape(-1).double())
    keep = torch.nonzero(mass > 0)[:, 0]
    keep = keep[mass[keep].argsort(descending=True)[:size]]
    extra = torch.tensor([int(a) for a in always], dtype=torch.long)
    return torch.unique(torch.cat([keep, extra]))
