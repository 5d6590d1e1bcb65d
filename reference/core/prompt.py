"""The prompt a model decodes from: token ids, and an encoder-decoder's encoder input beside them.

`TokenPrompt(ids, source)` is the one prompt type. `ids` is the sequence speculative decoding
extends (a causal LM's prompt; an encoder-decoder's decoder prefix, usually its start token);
`source` is what an encoder-decoder's encoder reads ({"input_ids": LongTensor [S]} for text,
{"input_features": float tensor [F, T]} for Whisper-like encoders), None for a causal LM. It is
a read-only sequence of the ids, so drafters, the verifier and the statistics read it as a
list; appending tokens (`prompt + tokens`) or slicing keeps the source. A plain list of ids is
a prompt without a source. Only the model adapter below the scorer seam
(`specdec.reference.model.seq2seq.ModelPass`) reads the source.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Iterator, Mapping, overload

from specdec.errors import SpecdecError


class TokenPrompt(Sequence):
    """Token ids and (for an encoder-decoder) the encoder's input for this one example."""

    __slots__ = ("ids", "source")

    def __init__(self, ids: Sequence[int], source: Mapping[str, Any] | None = None) -> None:
        if source is not None and not source:
            raise SpecdecError("an encoder-decoder prompt needs the encoder's input")
        self.ids: tuple[int, ...] = tuple(int(t) for t in ids)
        self.source = source

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> "TokenPrompt": ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return TokenPrompt(self.ids[i], self.source)
        return self.ids[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids)

    def __add__(self, tokens: Sequence[int]) -> "TokenPrompt":
        """The same source with `tokens` appended to the ids (a plain list + a prompt is refused)."""
        return TokenPrompt(self.ids + tuple(int(t) for t in tokens), self.source)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenPrompt):
            return self.ids == other.ids and self.source is other.source
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # the source is a mutable mapping of tensors

    def __repr__(self) -> str:
        return f"TokenPrompt({list(self.ids)}, source={None if self.source is None else list(self.source)})"

    def with_ids(self, ids: Sequence[int]) -> "TokenPrompt":
        """Other ids with this prompt's source."""
        return TokenPrompt(ids, self.source)

    @property
    def source_ids(self) -> list[int]:
        """The encoder's token ids ([] without a source, or for feature inputs)."""
        ids = None if self.source is None else self.source.get("input_ids")
        return [] if ids is None else [int(t) for t in ids.tolist()]


def as_prompt(prompt: Sequence[int]) -> Sequence[int]:
    """A prompt as a value of its own: a `TokenPrompt` as it is (read-only), other ids as a new list."""
    return prompt if isinstance(prompt, TokenPrompt) else [int(t) for t in prompt]


def with_ids(prompt: Sequence[int], ids: Sequence[int]) -> Sequence[int]:
    """`ids` as a prompt with `prompt`'s source (a plain list when it has none)."""
    if isinstance(prompt, TokenPrompt):
        return prompt.with_ids(ids)
    return [int(t) for t in ids]


def source_ids(prompt: Sequence[int]) -> list[int]:
    """The encoder's token ids of a prompt ([] when it has no text source)."""
    return prompt.source_ids if isinstance(prompt, TokenPrompt) else []
