"""A draft model on disk: a Hugging Face model folder (config, safetensors weights, the target's
tokenizer files) plus `card.json` (format "specdec-draft/1": the target by a hash of its
weights, the data, the training, the held-out quality, alpha per workload). Any tool that
loads a Llama folder loads it; specdec uses it as `--drafter model:DIR`.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

from specdec.paths import building
from specdec.reference.heads.files import CARD_NAME

FORMAT = "specdec-draft/1"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "tokenizer.model", "vocab.json", "merges.txt")


def check_out(out: str | os.PathLike, force: bool) -> Path:
    """`out`, refused in one line if it already holds files and force is not set."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} already exists and is not empty: pass --force to replace it")
    return out


def save_draft(draft: torch.nn.Module, target_dir: Path, out: str | os.PathLike, card: Callable[[Path], dict[str, Any]],
               force: bool = False) -> dict[str, Any]:
    """Write the draft (its weights), the target's tokenizer files and the card into `out`, built
    beside it and renamed into place; returns the card. `card(folder)` is called with the finished
    model folder before the card is written (so it can measure the saved draft)."""
    out = check_out(out, force)
    with building(out) as work:
        draft.save_pretrained(work)
        for name in TOKENIZER_FILES:
            if (Path(target_dir) / name).is_file():
                shutil.copy2(Path(target_dir) / name, work / name)
        written = {"format": FORMAT, **card(work)}
        (work / CARD_NAME).write_text(json.dumps(written, indent=2) + "\n")
    return written


def read_card(folder: str | os.PathLike) -> dict[str, Any]:
    """The card of a draft folder (a one-line error when it is missing or not a draft card)."""
    from specdec.reference.heads.store import card_in

    return card_in(Path(folder), FORMAT)
