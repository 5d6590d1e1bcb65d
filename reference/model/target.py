"""The target scorer: one forward pass of the target over the pending token and the drafts.

p is the target's distribution. The target's KV session always holds the committed
sequence with its last token pending; `score` feeds that token plus the k drafted tokens
(a chain, or the nodes of a tree) and returns k + 1 rows of logits, with the hidden states a
drafter asked for; `commit` keeps the accepted drafts' cache entries and drops the rest.
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import PreTrainedModel

from specdec.reference.model.kv_session import KVSession
from specdec.reference.core.seams import NOTHING, Needs, Proposal, Scored, Verdict
from specdec.reference.core.tree import is_chain


class TargetScorer:
    """Scores drafted tokens with the target model, keeping its KV cache across iterations."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.session = KVSession(model)

    @property
    def device(self) -> torch.device:
        """Where the logits are (the verifier and its generator work there)."""
        return self.session.output_device

    @property
    def forward_passes(self) -> int:
        return self.session.forward_passes

    @property
    def model(self) -> PreTrainedModel:
        return self.session.model

    @property
    def committed(self) -> list[int]:
        return self.session.tokens[: self.session.committed]

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False, needs: Needs = NOTHING) -> Scored | None:
        """Begin a sequence. fuse_prefill=True defers the prompt's encoding to the first
        `score`, so the prefill and the first verification are one forward pass (as in HF's
        assisted generation); otherwise the prompt (but its last token) is encoded now and
        that pass is returned."""
        return self.session.start(prompt, encode=not fuse_prefill, needs=needs)

    def score(self, proposal: Proposal, needs: Needs = NOTHING) -> Scored:
        """Logits [k + 1, vocab]: row i predicts the token after draft[:i] (row k: bonus); a
        draft tree (proposal.parents, `specdec.reference.core.tree`) goes through one tree pass."""
        draft = proposal.tokens.tolist()
        if proposal.parents is None or is_chain(proposal.parents):
            return self.session.extend(draft, n_logits=len(draft) + 1, needs=needs)
        return self.session.extend_tree(draft, proposal.parents, needs)

    def commit(self, verdict: Verdict) -> None:
        """Keep the first n_accepted drafts (for a tree: the path the verdict names), then
        append the verdict's last token (pending)."""
        self.session.commit(verdict)

    def rewind(self, length: int) -> None:
        """Back to the first `length` committed tokens, the last pending (the cache cropped)."""
        self.session.rewind(length)
