"""Prompts for the commands: held-out corpus prompts (the n-gram drafters never train on
them) or one prompt a line from a text file."""
from __future__ import annotations

import os
from pathlib import Path

from specdec.errors import SpecdecError


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


def prompts_from_file(path: str | os.PathLike, tokenizer, prompt_tokens: int | None = None
                      ) -> tuple[list[list[int]], list[str]]:
    """Prompts from a text file, one prompt a line (blank lines skipped); ids cut to prompt_tokens.

    Raises:
        FileNotFoundError: no such file.
        SpecdecError: the file is not UTF-8 or holds no non-empty prompt.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prompts file {str(path)!r} not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecdecError(f"prompts file {str(path)!r} is not valid UTF-8 (byte {exc.start})") from None
    texts = [line.strip() for line in text.splitlines() if line.strip()]
    ids = [list(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    ids = [x[:prompt_tokens] if prompt_tokens else x for x in ids]
    kept = [(x, f"{path.name}:{i + 1}") for i, x in enumerate(ids) if x]
    if not kept:
        raise SpecdecError(f"prompts file {str(path)!r} holds no prompt that encodes to tokens")
    return [x for x, _ in kept], [s for _, s in kept]


def load_prompts(target, n: int, prompt_tokens: int, prompts_file: str | os.PathLike | None
                 ) -> tuple[list[list[int]], list[str]]:
    """n prompts for a loaded target (`LoadedModel`): the first n of prompts_file, or n held-out
    corpus prompts. Returns (ids, source names)."""
    if prompts_file is not None:
        ids, names = prompts_from_file(prompts_file, target.tokenizer, prompt_tokens)
        return ids[:n], names[:n]
    return held_out_prompts(n, prompt_tokens, target.path)
