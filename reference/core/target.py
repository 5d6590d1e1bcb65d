"""The target scorer: one forward pass of the target over the pending token and the drafts.

p is the target's distribution. The target's KV session always holds the committed
sequence with its last token pending; `score` feeds that token plus k drafted tokens and
returns k + 1 rows of logits; `commit` crops the drafts that were rejected.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import torch
from transformers import PreTrainedModel

from specdec.reference.core.kv_session import KVSession
from specdec.reference.core.tree import is_chain, walk


class Scorer(Protocol):
    """What the decode loop needs from the target side."""

    device: torch.device
    forward_passes: int  # target forward passes so far (the loop reports the difference)

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False) -> None: ...

    def score(self, draft: Sequence[int], parents: Sequence[int] | None = None) -> torch.Tensor:
        """Logits [k + 1, vocab]: row i predicts the token after draft[:i] (row k: bonus); for
        a draft tree (parents given), row 0 the token after the pending one, row 1 + i the
        token after node i."""

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None: ...


class TargetScorer:
    """Scores drafted tokens with the target model, keeping its KV cache across iterations."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.session = KVSession(model)
        self._committed = 0
        self._tree: tuple[list[int], list[int]] | None = None  # the last pass's draft tree

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
        return self.session.tokens[: self._committed]

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False) -> None:
        """Begin a sequence. fuse_prefill=True defers the prompt's encoding to the first
        `score`, so the prefill and the first verification are one forward pass (as in HF's
        assisted generation); otherwise the prompt (but its last token) is encoded now."""
        self.session.start(prompt, encode=not fuse_prefill)
        self._committed = len(prompt)

    def score(self, draft: Sequence[int], parents: Sequence[int] | None = None) -> torch.Tensor:
        """Logits [k + 1, vocab]: row i predicts the token after draft[:i] (row k: bonus); a
        draft tree (parents, `specdec.reference.core.tree`) goes through one tree pass."""
        self._tree = None
        if parents is None or is_chain(parents):
            return self.session.extend(draft, n_logits=len(draft) + 1)
        self._tree = ([int(t) for t in draft], list(parents))
        return self.session.extend_tree(draft, parents)

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        """Keep the first n_accepted drafts (for a tree: the path they spell), then append the
        remaining `tokens` (pending)."""
        if self._tree is not None:
            self.session.keep_tree_path(walk(*self._tree, tokens[:n_accepted]))
            self._tree = None
        else:
            self.session.truncate(self._committed + n_accepted)
        self.session.append(tokens[n_accepted:])
        self._committed += len(tokens)


class FixedLogitsScorer:
    """A scorer that returns the same real logits instantly: the decode loop's own cost
    (sampling transform, verifier, bookkeeping) is what remains when it is timed."""

    forward_passes = 0

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits  # [K + 1, vocab]
        self.device = logits.device

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False) -> None:
        pass

    def score(self, draft: Sequence[int], parents: Sequence[int] | None = None) -> torch.Tensor:
        return self.logits[:len(draft) + 1]

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        pass
