"""Blockwise parallel draft heads on a frozen target (Stern et al. 2018; Kim et al. 2024).

The target's own output layer predicts y, the token after position t, from its last hidden
state h_t; head i (i = 1..H, H = h - 1) predicts the token i positions after y from the same
pass: z_i = h_t + SiLU(W_i [h_t; e(y)] + b_i), a residual block (W_i = 0 at initialisation),
logits_i = E' z_i with E' the target's frozen output layer restricted to `vocab` (the ids the
target predicts often) and e(y) the target's frozen input embedding of y. y is the token the
decoder has just committed, so q_i depends on the committed prefix only, never on other
drafts; q_i puts no mass outside `vocab`. Both keep Algorithm 1 exact (docs/heads.md, which
also records why e(y) is an input: it raised head 1's held-out agreement from 0.24 to 0.38).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from specdec.errors import SpecdecError
from specdec.reference.model.forward import forward
from specdec.reference.model.placement import input_device
from specdec.reference.core.seams import Needs


class BlockHeads(torch.nn.Module):
    """H residual heads over a shared, frozen, vocabulary-restricted output layer.

    weight: [H, d, 2d], bias: [H, d] (trained); vocab: int64 [V'] target ids the heads can
    propose; out_weight: [V', d], the target's output-layer rows for `vocab` (frozen, a copy,
    not saved); embedding: [vocab_size, d], the target's input embeddings (frozen, shared, not saved).
    """

    def __init__(self, n_heads: int, vocab: torch.Tensor, out_weight: torch.Tensor, embedding: torch.Tensor) -> None:
        super().__init__()
        hidden_size = int(out_weight.shape[1])
        if n_heads < 1:
            raise ValueError(f"need at least one head, got {n_heads}")
        if out_weight.shape != (vocab.numel(), hidden_size) or embedding.shape[1] != hidden_size:
            raise ValueError(f"out_weight must be [{vocab.numel()}, d] and embedding [vocab_size, d], got "
                             f"{tuple(out_weight.shape)} and {tuple(embedding.shape)}")
        self.weight = torch.nn.Parameter(torch.zeros(n_heads, hidden_size, 2 * hidden_size))
        self.bias = torch.nn.Parameter(torch.zeros(n_heads, hidden_size))
        self.register_buffer("vocab", vocab.to(torch.long).clone())
        self.register_buffer("embedding", embedding.detach(), persistent=False)
        self.out = torch.nn.Linear(hidden_size, vocab.numel(), bias=False)
        self.out.weight = torch.nn.Parameter(out_weight.detach().float().clone(), requires_grad=False)

    @property
    def n_heads(self) -> int:
        return int(self.weight.shape[0])

    @property
    def hidden_size(self) -> int:
        return int(self.weight.shape[1])

    def states(self, hidden: torch.Tensor, token: torch.Tensor, n_heads: int | None = None) -> torch.Tensor:
        """hidden [N, d], token int64 [N] (y) -> the first n_heads (default all) heads' residual
        states [N, n_heads, d]."""
        n = self.n_heads if n_heads is None else n_heads
        hidden = hidden.float()
        x = torch.cat([hidden, self.embedding[token].float()], dim=-1)  # [N, 2d]
        pre = torch.einsum("nd,hed->nhe", x, self.weight[:n]) + self.bias[:n]  # [N, n, d]
        return hidden[:, None, :] + F.silu(pre)

    def forward(self, hidden: torch.Tensor, token: torch.Tensor, n_heads: int | None = None) -> torch.Tensor:
        """hidden [N, d], token [N] -> restricted logits [N, n_heads, V'] of the first n_heads heads
        (default all; column j is target id vocab[j]). A drafter asking for k heads pays for k."""
        return self.out(self.states(hidden, token, n_heads))

    def full_logits(self, restricted: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """Restricted logits [..., V'] -> logits over the target's vocabulary [..., vocab_size],
        -inf outside `vocab` (q is 0 there)."""
        return full_logits(restricted, self.vocab, vocab_size)


def full_logits(restricted: torch.Tensor, vocab: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Logits over a restricted vocabulary [..., V'] (column j is id vocab[j]) -> logits over
    the whole vocabulary [..., vocab_size], -inf outside `vocab`."""
    full = restricted.new_full((*restricted.shape[:-1], vocab_size), float("-inf"))
    full[..., vocab] = restricted
    return full


def block_inputs(model: torch.nn.Module, prompt: Sequence[int], cont: Sequence[int]
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced inputs of the block the heads draft at every continuation position t:
    h under x_(t-1) (the state two positions back) and y = x_(t-1). One target pass over
    prompt + cont[:-1]. Returns hidden [n, d] and token int64 [n], n = len(cont)."""
    if len(prompt) < 2:
        raise SpecdecError("the heads draft from the hidden state under the token before the last: prompts of at "
                           "least 2 tokens")
    seq = list(prompt) + list(cont)
    device = input_device(model)
    _, hidden, _ = forward(model, torch.tensor([seq[:-1]], device=device), 1, Needs(hidden=True))
    starts = torch.arange(len(prompt) - 2, len(prompt) - 2 + len(cont))
    return hidden[0][starts], torch.tensor(seq, device=hidden.device)[starts + 1]
