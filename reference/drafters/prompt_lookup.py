"""Prompt-lookup drafter: copy what followed an earlier occurrence of the context's suffix
(an n-gram of the sequence itself; Leviathan et al. Sec. 3.6, "prompt lookup" in HF).

It is deterministic (q = None, i.e. one-hot). Which occurrence: `match="latest"` (default:
the most recent text is the likeliest to repeat) or `match="earliest"`, the rule of Hugging
Face's `PromptLookupCandidateGenerator` (transformers 5.x: the first match left to right, n-grams
of at most `max_matching_ngram_size` = 2 tokens); `PromptLookupDrafter(2, match="earliest")`
proposes exactly what `generate(prompt_lookup_num_tokens=gamma)` proposes (tested). An index
from n-gram to the position after its latest / earliest occurrence is updated as tokens
arrive, so a proposal costs O(max_ngram + gamma), independent of the context length.
For an encoder-decoder target the encoder's text comes first in the searched sequence (the
decoder copies from its source in summarization and translation of names and numbers).
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Proposal, Scored, Verdict
from specdec.reference.core.prompt import source_ids
from specdec.reference.drafters.protocol import DrafterBase


class PromptLookupDrafter(DrafterBase):
    """Proposes the continuation of the longest suffix n-gram (max_ngram down to min_ngram)
    that occurred earlier in the sequence."""

    deterministic = True

    MATCHES = ("latest", "earliest")

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, match: str = "latest") -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise SpecdecError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        if match not in self.MATCHES:
            raise SpecdecError(f"prompt lookup match must be one of {', '.join(self.MATCHES)}, got {match!r}")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.match = match
        self.tokens: list[int] = []
        # index[n][ngram] = position right after the latest (earliest) occurrence of that n-gram
        self.index: dict[int, dict[tuple[int, ...], int]] = {}

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        self.tokens = []
        self.index = {n: {} for n in range(self.min_ngram, self.max_ngram + 1)}
        self._append(source_ids(prompt) + list(prompt))

    def _append(self, new: Sequence[int]) -> None:
        latest = self.match == "latest"
        for t in new:
            end = len(self.tokens)  # the n-grams ending just before `t` are followed by it
            for n, table in self.index.items():
                if end >= n:
                    key = tuple(self.tokens[end - n:end])
                    if latest or key not in table:
                        table[key] = end
            self.tokens.append(int(t))

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Copy up to gamma tokens. Deterministic (q one-hot, confidence 1): keep_going is not
        asked."""
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if len(self.tokens) < n:
                continue
            pos = self.index[n].get(tuple(self.tokens[-n:]))
            if pos is not None:
                return Proposal(torch.tensor(self.tokens[pos:pos + gamma], dtype=torch.long))
        return Proposal(torch.empty(0, dtype=torch.long))

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        self._append(verdict.tokens.tolist())


def build_drafter(arg: str | None, target, **place) -> tuple[PromptLookupDrafter, None]:
    """The registry's builder of `lookup[:N[:earliest|latest]]`."""
    from specdec.reference.drafters.spec import lookup_args

    n, match = lookup_args(arg)
    return PromptLookupDrafter(max_ngram=n, match=match), None
