"""KenLM n-gram drafter: a negligible-cost draft model (c ~ 0, Leviathan et al. Sec. 3.6).

Names follow the paper: p target, q draft, gamma drafted tokens. q comes from
`specdec.ngram.model.NgramModel` over the target's whole vocabulary; state handling, sampling
and greedy drafting: docs/ngram.md.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from specdec.ngram.model import NgramModel
from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.core.seams import Proposal, Scored, Verdict
from specdec.reference.drafters.protocol import DrafterBase

if TYPE_CHECKING:
    from specdec.reference.estimate.teacher_forced import DraftScorer


class NgramDrafter(DrafterBase):
    """Drafts from a KenLM back-off n-gram model over target token ids.

    Args:
        path: a model folder from `specdec ngram build` (or its model.arpa / model.binary).
        vocab_size: the target's vocabulary size V (q rows are [V]).
        eos_id: the target id `</s>` stands for; default: the one recorded at build time.
        bos: start each sequence from KenLM's sentence-start context `<s>` (matters only
            for prompts shorter than N-1 tokens).
        stop_at_eos: stop drafting after proposing eos_id (the decoder stops there anyway).
    """

    def __init__(self, path: str | os.PathLike, vocab_size: int, eos_id: int | None = None,
                 bos: bool = True, stop_at_eos: bool = True) -> None:
        self.model = NgramModel.load(path, vocab_size, eos_id)
        self.vocab_size = vocab_size
        self.bos = bos
        self.stop_at_eos = stop_at_eos
        self._state = self.model.begin(bos)

    @property
    def order(self) -> int:
        return self.model.order

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        """The committed sequence becomes `prompt` (only its last N-1 tokens matter)."""
        self._state = self.model.state_for(_ints(prompt), self.bos)

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Draft up to gamma tokens, until keep_going (asked with the unadjusted q) says stop.
        q: float32 [k, V] adjusted draft rows, None when greedy."""
        model, state = self.model, self._state
        eos = model.eos_id if self.stop_at_eos else None
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        for i in range(gamma):
            log_q = model.log_q(state)                                    # [V] natural log
            if keep_going is not None and not keep_going(i, torch.from_numpy(log_q).exp()):
                break  # hand over to the target (this position is not drafted)
            if sampling.greedy:
                token = int(np.argmax(log_q))
            else:
                q = sampling.probs(torch.from_numpy(log_q))               # [V] adjusted
                token = int(sample(q, generator))
                rows.append(q)
            tokens.append(token)
            if token == eos:
                break
            state = model.advance(state, token)
        q_out = torch.stack(rows) if rows else None
        if q_out is None and not sampling.greedy:
            q_out = torch.empty(0, self.vocab_size, dtype=torch.float32)
        return Proposal(torch.tensor(tokens, dtype=torch.long), q_out)

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        """Append the decoder's emitted tokens to the committed context."""
        for t in _ints(verdict.tokens):
            self._state = self.model.advance(self._state, t)

    def c_hat(self, target_flops: float) -> float:
        """~ (order + 2) operations per vocabulary entry per drafted token (q over all V ids)."""
        return (self.order + 2) * self.vocab_size / target_flops

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int,
                              generator: torch.Generator | None) -> "DraftScorer":
        from specdec.reference.estimate.teacher_forced import NgramScorer
        return NgramScorer(self)

    def score_sequence(self, tokens: Sequence[int], bos: bool | None = None) -> np.ndarray:
        """Teacher-forced q: float32 [len(tokens), V] natural probabilities (unadjusted).

        Row i is q(. | tokens[:i+1]), aligned with a causal LM's logits[i] (the
        distribution of tokens[i+1]).
        """
        return self.model.score_sequence(_ints(tokens), self.bos if bos is None else bos)


def _ints(tokens: Sequence[int] | torch.Tensor) -> list[int]:
    if isinstance(tokens, torch.Tensor):
        return tokens.reshape(-1).tolist()
    return [int(t) for t in tokens]


def build_drafter(arg: str, target, **place) -> tuple[NgramDrafter, None]:
    """The registry's builder of `ngram:PATH` (ids beyond the model's are the target's padding rows)."""
    return NgramDrafter(arg, vocab_size=target.vocab_size), None
