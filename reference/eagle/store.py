"""A feature draft on disk: a folder with `eagle.safetensors` (fc and the layer's weights, the
vocabulary) and `card.json` (the target, by a hash of its weight files, as the heads' card;
the layer's shape; how it was trained; its held-out quality). Loading it for another target is
refused in one line.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from specdec.errors import SpecdecError
from specdec.reference.eagle.model import Block, EagleDraft, draft_on
from specdec.reference.eagle.files import WEIGHTS_NAME, eagle_folder
from specdec.reference.heads.store import card_in, load_trained, save_trained

FORMAT = "specdec-eagle/1"


def read_card(path: str | os.PathLike) -> dict[str, Any]:
    return card_in(eagle_folder(path), FORMAT)


def save_eagle(draft: EagleDraft, card: dict[str, Any], out: str | os.PathLike, force: bool = False) -> Path:
    """Write the draft and its card into `out`, built beside it and renamed into place."""
    return save_trained({**draft.trained(), "vocab": draft.vocab}, card, out, WEIGHTS_NAME, FORMAT, force)


def legacy_name(name: str) -> str:
    """A one-layer draft saved before drafts had several layers named its layer's tensors
    without the "blocks.0." prefix."""
    return f"blocks.0.{name}" if name.split(".")[0] in Block.NAMES else name


def load_eagle(path: str | os.PathLike, model: torch.nn.Module, model_dir: str | os.PathLike
               ) -> tuple[EagleDraft, dict[str, Any]]:
    """The draft at `path` on the target `model` (loaded from `model_dir`), after checking that
    the card names this target's weights; output rows and embeddings come from the target."""
    folder = eagle_folder(path)
    card, tensors, vocab = load_trained(folder, FORMAT, WEIGHTS_NAME, model, model_dir, "feature draft")
    draft = draft_on(model, vocab, tuple(card.get("fuse_layers", ())), int(card.get("draft_layers", 1)))
    tensors = {legacy_name(name): t for name, t in tensors.items()}
    expected = {name: tuple(p.shape) for name, p in draft.trained().items()}
    found = {name: tuple(t.shape) for name, t in tensors.items()}
    if found != expected:
        raise SpecdecError(f"{str(folder / WEIGHTS_NAME)!r} does not hold a feature draft for this target's shapes")
    with torch.no_grad():
        for name, p in draft.trained().items():
            p.copy_(tensors[name])
    return draft.eval(), card
