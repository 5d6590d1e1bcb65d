"""The heads drafter: blockwise parallel heads on the target's own last pass (BPD's
Predict / Verify / Accept with the target as its own drafter; docs/heads.md).

The pass that verifies a block also gives the hidden state h under the token y the decoder
then commits; the heads draft the block after y from (h, y) with no pass of their own. The
prefill pass (the prompt but its last token) ends with h under the prompt's last token, so
the first iteration drafts too; with a fused prefill there is no such pass and it drafts nothing.
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.drafters.protocol import Proposal
from specdec.reference.heads.model import BlockHeads, HiddenCapture


class HeadsDrafter:
    """Drafts up to H tokens per iteration from the target's last hidden state.

    target: the target model the decoder verifies with (its output layer is hooked to read h);
    vocab_size: rows of the target's output layer (q's width).
    """

    def __init__(self, target: torch.nn.Module, heads: BlockHeads, vocab_size: int) -> None:
        self.target = target
        self.heads = heads
        self.vocab_size = vocab_size
        self.capture = HiddenCapture(target)
        self.hidden: torch.Tensor | None = None  # [d], h under the last committed token
        self.token: int | None = None  # y, the last committed token
        self._seen = 0  # capture.passes at the last commit

    def start(self, prompt: Sequence[int]) -> None:
        """Begin `prompt`; h comes from the target's prefill pass if that pass just ran."""
        self.hidden, self.token = None, int(prompt[-1]) if len(prompt) else None
        ids = self.capture.last_ids
        if self.capture.passes > self._seen and len(prompt) > 1 and ids is not None and ids.shape[0] == 1 \
                and ids.shape[1] == len(prompt) - 1 and ids[0].tolist() == [int(t) for t in prompt[:-1]]:
            self.hidden = self.capture.last[0, -1]
        self._seen = self.capture.passes

    @torch.inference_mode()
    def prime(self, context: Sequence[int]) -> None:
        """Start on `context` with h from a target pass of its own (standalone use, e.g. timing
        the heads; in the decode loop the verification passes feed the drafter instead)."""
        if len(context) < 2:
            raise ValueError("priming the heads needs a context of at least 2 tokens")
        self.start(context)
        ids = torch.tensor([list(context)], dtype=torch.long, device=self.heads.weight.device)
        self.target(input_ids=ids, logits_to_keep=2)
        self.hidden = self.capture.last[0, 0]  # under context[-1], the committed y
        self._seen = self.capture.passes

    @torch.inference_mode()
    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                min_confidence: float = 0.0) -> Proposal:
        """Each head's argmax at temperature 0; at T > 0 a draw from each head's adjusted q_i.
        Stops before the first head whose unadjusted top probability is below min_confidence."""
        k = min(gamma, self.heads.n_heads)
        if self.hidden is None or k <= 0:
            return Proposal.empty()
        token = torch.tensor([self.token], dtype=torch.long, device=self.hidden.device)
        restricted = self.heads(self.hidden[None], token, k)[0]  # [k, V']
        if min_confidence > 0:
            confident = restricted.softmax(-1).max(-1).values >= min_confidence
            k = int(confident.long().cumprod(0).sum())
            restricted = restricted[:k]
        if sampling.greedy:
            tokens, q = self.heads.vocab[restricted.argmax(-1)], None
        else:
            q = sampling.probs(self.heads.full_logits(restricted, self.vocab_size))  # [k, vocab]
            tokens = sample(q, generator) if k else torch.empty(0, dtype=torch.long)
        return Proposal(tokens.to(torch.long).cpu().reshape(-1), q)

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        """The target pass that verified the last proposal kept k + 1 rows of hidden states
        (the scorer asks for k + 1 logits); the last committed token came from row
        len(tokens) - 1, whose hidden state drafts the next block. With no new target pass
        (standalone timing) the old h is kept under the new y."""
        if self.capture.passes > self._seen and self.capture.last is not None:
            rows = self.capture.last[0]  # [k + 1, d]
            if not 0 < len(tokens) <= rows.shape[0]:
                raise ValueError(f"committed {len(tokens)} tokens after a pass with {rows.shape[0]} rows")
            self.hidden = rows[len(tokens) - 1]
            self._seen = self.capture.passes
        if len(tokens):
            self.token = int(tokens[-1])

    def close(self) -> None:
        self.capture.close()
