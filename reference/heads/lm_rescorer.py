"""A neural local rescorer (Kim et al. 2024, Algorithm 2 with a small autoregressive LM): any
Hugging Face causal LM over the target's vocabulary, queried like an `NgramModel` so that
`specdec.ngram.rescore.local_rescore` takes either.

A state is the context itself (a tuple of ids). The model keeps one KV cache: a query keeps
the longest prefix the cache shares with the state and feeds the rest, so local rescoring
costs one one-token pass per draft position after a short catch-up on the committed tokens.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from specdec.reference.model.kv_session import KVSession
from specdec.reference.drafters.neural import fit_vocab


class LMRescorer:
    """ln P_lm(x | context) over the target's `vocab_size` ids (ids past the LM's vocabulary: -inf)."""

    def __init__(self, model: torch.nn.Module, vocab_size: int) -> None:
        self.session = KVSession(model)
        self.vocab_size = vocab_size
        self.queries = 0  # log_q calls that ran the model

    def state_for(self, tokens: Sequence[int]) -> tuple:
        return tuple(int(t) for t in tokens)

    def advance(self, state: tuple, token: int) -> tuple:
        return state + (int(token),)

    @torch.inference_mode()
    def log_q(self, state: tuple) -> np.ndarray:
        """Natural log-probabilities of the next id after `state` (float32 [vocab_size])."""
        if not state:
            raise ValueError("the LM rescorer needs a non-empty context")
        tokens = self.session.tokens
        common = 0
        for a, b in zip(tokens, state):
            if a != b:
                break
            common += 1
        keep = min(common, len(state) - 1)
        if not tokens or keep == 0:
            self.session.start(list(state))
            logits = self.session.extend([], n_logits=1).logits[0]
        else:
            self.session.truncate(keep)
            logits = self.session.extend(list(state[keep:]), n_logits=1).logits[0]
        self.queries += 1
        return fit_vocab(logits.float(), self.vocab_size).log_softmax(-1).cpu().numpy()
