"""Teacher-forced draft rows of blockwise heads: the block at continuation position t is what
the heads draft from the target's hidden state two positions back, under the committed token
just before t (docs/heads.md); one target pass per sequence gives every block."""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.estimate.samples import TargetSamples
from specdec.reference.estimate.teacher_forced import DraftRows
from specdec.reference.heads.model import BlockHeads, block_inputs


class HeadsScorer:
    """The heads' blocks on the target's own sequences; target: the model the heads read."""

    def __init__(self, target: torch.nn.Module, heads: BlockHeads, max_gamma: int = 16) -> None:
        self.target = target
        self.heads = heads
        self.width = min(max_gamma, heads.n_heads)

    @torch.inference_mode()
    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        out = []
        for i in indices:
            hidden, token = block_inputs(self.target, samples.prompts[i], samples.continuations[i])
            restricted = self.heads(hidden, token, self.width)  # [n, width, V']
            if sampling.greedy:
                blocks = self.heads.vocab[restricted.argmax(-1)].cpu()  # [n, H]
                out.append(DraftRows(None, blocks[:, 0], blocks=blocks.tolist(), blockwise=True))
            else:
                q = sampling.probs(self.heads.full_logits(restricted, vocab_size))  # [n, H, V]
                out.append(DraftRows(q[:, 0], None, offset_q=q, blockwise=True))
        return out
