"""Prompts for the commands as token ids: where they come from (`PromptSource`: the held-out
corpus, a file, or embedded workloads), the chat template, and long prompts refused or cut
from the start of the user's content (`encode_prompt`). The result, `PromptSet`, keeps each
prompt's category, so estimate and validate can report per category. docs/workloads.md.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from specdec.errors import SpecdecError
from specdec.reference.data.prompt_sources import Prompt, read_prompts_file, select_categories

CHAT_TEMPLATES = ("auto", "none")
TRUNCATE = ("refuse", "left")
DEFAULT_MAX_PROMPT_TOKENS = 2048


@dataclass(frozen=True)
class PromptSource:
    """Which prompts a command runs on and how they become ids.

    file: a prompts file (`read_prompts_file`), or workloads: embedded workload names, or neither:
    the held-out corpus (the `continue` workload). categories: keep only these (None: all).
    chat_template: "auto" applies the target tokenizer's template to user turns when it has one;
    "none" never. prompt_tokens: the length of held-out corpus prompts. max_prompt_tokens /
    truncate: a longer prompt is refused ("refuse") or its user content cut from the start ("left").
    """

    file: Path | None = None
    workloads: tuple[str, ...] = ()
    categories: tuple[str, ...] | None = None
    chat_template: str = "auto"
    prompt_tokens: int = 64
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS
    truncate: str = "refuse"
    encoder_inputs: Path | None = None  # precomputed encoder inputs, one prompt each (docs/encoder-decoder.md)

    def __post_init__(self) -> None:
        if self.file is not None and self.workloads:
            raise SpecdecError("give a prompts file or workloads, not both")
        if self.encoder_inputs is not None and (self.file is not None or self.workloads):
            raise SpecdecError("encoder inputs are the prompts: give them without a prompts file or workloads")
        if self.chat_template not in CHAT_TEMPLATES:
            raise SpecdecError(f"chat template must be one of {', '.join(CHAT_TEMPLATES)}, got {self.chat_template!r}")
        if self.truncate not in TRUNCATE:
            raise SpecdecError(f"truncate must be one of {', '.join(TRUNCATE)}, got {self.truncate!r}")
        if min(self.prompt_tokens, self.max_prompt_tokens) < 1:
            raise SpecdecError("prompt_tokens and max_prompt_tokens must be >= 1")

    def prompts(self, n: int, tokenizer_dir: str | os.PathLike | None) -> list[Prompt]:
        """Up to n prompts of every category (a file's first n per category; n per workload)."""
        from specdec.reference.data.workloads import workload_prompts

        if self.file is not None:
            chosen = select_categories(read_prompts_file(self.file), self.categories)
            seen: dict[str, int] = {}
            out = []
            for p in chosen:
                seen[p.category] = seen.get(p.category, 0) + 1
                if seen[p.category] <= n:
                    out.append(p)
            return out
        names = self.workloads or ("continue",)
        prompts = [p for name in names for p in workload_prompts(name, n, True, self.prompt_tokens, tokenizer_dir)]
        return select_categories(prompts, self.categories)


@dataclass
class PromptSet:
    """Encoded prompts: ids, names and categories (parallel lists), whether the chat template was
    applied to the turns, and how many prompts were cut."""

    ids: list[list[int]]
    names: list[str]
    categories: list[str]
    chat_template: bool = False
    truncated: int = 0

    @property
    def lengths(self) -> dict[str, list[int]]:
        """Prompt lengths in tokens by category, categories in first-seen order."""
        out: dict[str, list[int]] = {}
        for ids, category in zip(self.ids, self.categories):
            out.setdefault(category, []).append(len(ids))
        return out

    @property
    def longest(self) -> int:
        return max(len(ids) for ids in self.ids)

    def median_length(self, category: str) -> int:
        """The category's median prompt length (the upper one of an even count)."""
        lengths = sorted(self.lengths[category])
        return lengths[len(lengths) // 2]

    def category_names(self) -> list[str]:
        """Categories in first-seen order."""
        return list(self.lengths)

    def of(self, category: str) -> list[list[int]]:
        return [ids for ids, c in zip(self.ids, self.categories) if c == category]

    def describe(self) -> dict:
        """What the report records about the prompts."""
        return {"count": len(self.ids), "chat_template": self.chat_template, "truncated": self.truncated,
                "categories": {c: {"prompts": len(v), "median_tokens": self.median_length(c), "max_tokens": max(v)}
                               for c, v in self.lengths.items()}}


def uses_template(tokenizer, prompt: Prompt, chat_template: str) -> bool:
    return chat_template == "auto" and prompt.turn and getattr(tokenizer, "chat_template", None) is not None


def render(tokenizer, prompt: Prompt, content: str, chat_template: str) -> list[int]:
    """Ids of one prompt with `content` as its user text (templated when `uses_template`)."""
    if uses_template(tokenizer, prompt, chat_template):
        text = tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                             add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(content, add_special_tokens=False)["input_ids"])


TOKEN_CHARS_MARGIN = 4  # headroom over "a token spells at most longest_token characters" for normalizers


@functools.lru_cache(maxsize=4)
def longest_token(tokenizer) -> int:
    """The most characters one vocabulary entry spells (byte-level entries: one character per
    byte), so a text of n characters has at least n / longest_token tokens."""
    return max(1, max(len(t) for t in tokenizer.get_vocab()))


def encode_prompt(tokenizer, prompt: Prompt, chat_template: str, max_tokens: int, truncate: str
                  ) -> tuple[list[int], bool]:
    """(ids, truncated): the prompt's ids; when longer than max_tokens, refused or (truncate="left")
    cut from the START of the user content (the template and the end of the content, where the
    instruction is, stay), by the fewest whole content tokens that make it fit.

    Raises:
        SpecdecError: too long and truncate="refuse", or even an empty content does not fit.
    """
    keep = TOKEN_CHARS_MARGIN * longest_token(tokenizer) * (max_tokens + 64)  # more than max_tokens tokens surely
    if prompt.ids is None and len(prompt.text) > keep:
        if truncate == "refuse":  # certainly too long: refused without tokenizing megabytes
            raise SpecdecError(f"prompt {prompt.name} has {len(prompt.text):,} characters, more than "
                               f"--max-prompt-tokens {max_tokens} tokens can hold (raise it, or cut long prompts "
                               "from the start with --truncate left)")
        prompt = replace(prompt, text=prompt.text[-keep:])  # the tokens cut below all lie in this tail
    ids = list(prompt.ids) if prompt.ids is not None else render(tokenizer, prompt, prompt.text, chat_template)
    if not ids:
        raise SpecdecError(f"prompt {prompt.name} encodes to no tokens")
    if len(ids) <= max_tokens:
        return ids, False
    if truncate == "refuse":
        raise SpecdecError(f"prompt {prompt.name} has {len(ids)} tokens, more than --max-prompt-tokens {max_tokens} "
                           "(raise it, or cut long prompts from the start with --truncate left)")
    if prompt.ids is not None:  # plain ids: no template to keep
        return ids[-max_tokens:], True
    content = list(tokenizer(prompt.text, add_special_tokens=False)["input_ids"])

    def fits(drop: int) -> list[int] | None:
        out = render(tokenizer, prompt, tokenizer.decode(content[drop:]), chat_template)
        return out if len(out) <= max_tokens else None

    if fits(len(content) - 1) is None:
        raise SpecdecError(f"prompt {prompt.name}: its template alone needs more than --max-prompt-tokens {max_tokens}")
    low, high = 1, len(content) - 1  # the fewest dropped tokens that fit lies in [low, high]
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if fits(mid) is not None else (mid + 1, high)
    return fits(low), True


def encode_prompts(tokenizer, prompts: Sequence[Prompt], source: PromptSource) -> PromptSet:
    encoded = [encode_prompt(tokenizer, p, source.chat_template, source.max_prompt_tokens, source.truncate)
               for p in prompts]
    return PromptSet([ids for ids, _ in encoded], [p.name for p in prompts], [p.category for p in prompts],
                     any(uses_template(tokenizer, p, source.chat_template) for p in prompts),
                     sum(cut for _, cut in encoded))


def load_prompt_set(tokenizer, tokenizer_dir: str | os.PathLike | None, n: int, source: PromptSource) -> PromptSet:
    """n prompts per category of `source`, encoded (see `PromptSource` and `encode_prompt`)."""
    return encode_prompts(tokenizer, source.prompts(n, tokenizer_dir), source)


def held_out_prompts(n: int, prompt_tokens: int, target_path: str | os.PathLike | None = None
                     ) -> tuple[list[list[int]], list[str]]:
    """n held-out prompts of exactly prompt_tokens ids (Shakespeare + Austen evaluation split).

    The prompts come from `specdec.reference.data.corpus.eval_prompts`, the split the n-gram drafters never
    train on (tokenized with the target's tokenizer). Returns (ids, source names).
    """
    from specdec.reference.data.corpus import eval_prompts

    if target_path is None:
        from specdec.reference.data.default_model import default_target_path
        target_path = default_target_path()
    prompts = eval_prompts(n, prompt_tokens, tokenizer_dir=Path(target_path))
    return [list(p.ids) for p in prompts], [f"{p.source}/{p.doc}/{p.chunk}" for p in prompts]
