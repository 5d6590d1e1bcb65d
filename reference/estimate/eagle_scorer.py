"""Teacher-forced draft rows of the feature draft (EAGLE): the block at continuation position t
is what the draft drafts when prompt + x_<t is committed, from the target's features of every
committed position but the pending one; one target pass and one unrolled draft pass
(`specdec.reference.eagle.unroll`) per sequence give every block. At temperature 0 each block
is the draft's own greedy chain (exact greedy acceptance); at T > 0 draft position i of the
block at t is q with the true tokens before it and the draft's own features (as the heads'
per-position acceptance is measured), so the first position is exact and deeper ones are
conditioned on the target's tokens. A tree drafter's trees: `estimate.tree_walk`."""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.model.forward import forward
from specdec.reference.model.placement import input_device
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.eagle.model import EagleDraft
from specdec.reference.eagle.unroll import unroll
from specdec.reference.estimate.samples import TargetSamples
from specdec.reference.estimate.teacher_forced import DraftRows

MAX_POSITIONS = 8  # per-position alphas measured (q rows over the full vocabulary are kept at T > 0)


class EagleScorer:
    """The draft's blocks on the target's own sequences; target: the model whose features it reads."""

    def __init__(self, target: torch.nn.Module, draft: EagleDraft, max_gamma: int = 16) -> None:
        self.target = target
        self.draft = draft
        self.width = min(max_gamma, MAX_POSITIONS)

    @torch.inference_mode()
    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        out = []
        for i in indices:
            prompt, cont = samples.prompts[i], samples.continuations[i]
            if len(prompt) < 2:
                raise SpecdecError("the feature draft drafts from the features before the pending token: prompts of "
                                   "at least 2 tokens")
            seq = list(prompt) + list(cont)
            device = input_device(self.target)
            _, hidden, layers = forward(self.target, torch.tensor([seq[:-1]], device=device), 1, self.draft.needs)
            at_device = self.draft.vocab.device
            # the last position's feature is never read (no entry follows it): padded with zeros
            features = pad_row(hidden).to(at_device)
            layers = None if layers is None else pad_row(layers).to(at_device)
            tokens = torch.tensor([seq], device=at_device)
            first, n = len(prompt) - 2, len(cont)
            logits, _ = unroll(self.draft, features, tokens, self.width, own=sampling.greedy, first_row=first,
                               layers=layers)
            rows = torch.arange(n, device=tokens.device)
            # depth j of the block at t sits at row t + j - 1 (after first_row), clamped past the end
            at = [lg[0, (rows + j).clamp_max(lg.shape[1] - 1)] for j, lg in enumerate(logits)]  # [n, V'] each
            if sampling.greedy:
                blocks = self.draft.vocab[torch.stack([a.argmax(-1) for a in at], 1)].cpu()  # [n, width]
                out.append(DraftRows(None, blocks[:, 0], blocks=blocks.tolist(), blockwise=True))
            else:
                q = sampling.probs(self.draft.full_logits(torch.stack(at, 1), vocab_size))  # [n, width, V]
                out.append(DraftRows(q[:, 0], None, offset_q=q, blockwise=True))
        return out


def pad_row(x: torch.Tensor) -> torch.Tensor:
    """x [1, T, ...] as float32 with one more row of zeros: [1, T + 1, ...]."""
    return torch.cat([x.float(), x.new_zeros(1, 1, *x.shape[2:]).float()], 1)

