"""A feature draft on disk: a folder with `eagle.safetensors` (fc and the layer's weights, the
vocabulary) and `card.json` (the target, by a hash of its weight files, as the heads' card;
the layer's shape; how it was trained; its held-out quality). Loading it for another target is
refused in one line.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from specdec.errors import SpecdecError
from specdec.paths import building
from specdec.reference.eagle.model import EagleDraft, draft_on
from specdec.reference.heads.store import weights_fingerprint

FORMAT = "specdec-eagle/1"
WEIGHTS_NAME = "eagle.safetensors"
CARD_NAME = "card.json"


def eagle_folder(path: str | os.PathLike) -> Path:
    """The folder for a path given on the command line (the folder or its safetensors file); a
    one-line FileNotFoundError when a file is missing (torch-free: checked before models load)."""
    path = Path(path)
    folder = path.parent if path.is_file() else path
    for name in (WEIGHTS_NAME, CARD_NAME):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{str(folder)!r} holds no feature draft: {name} is missing "
                                    "(make one with `specdec eagle train`)")
    return folder


def read_card(path: str | os.PathLike) -> dict[str, Any]:
    folder = eagle_folder(path)
    try:
        card = json.loads((folder / CARD_NAME).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecdecError(f"cannot read {str(folder / CARD_NAME)!r}: {exc}") from None
    if not isinstance(card, dict) or card.get("format") != FORMAT:
        raise SpecdecError(f"{str(folder / CARD_NAME)!r} is not a {FORMAT} card")
    return card


def save_eagle(draft: EagleDraft, card: dict[str, Any], out: str | os.PathLike, force: bool = False) -> Path:
    """Write the draft and its card into `out`, built beside it and renamed into place."""
    from safetensors.torch import save_file

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} already exists and is not empty: pass --force to replace it")
    tensors = {name: t.detach().cpu().contiguous() for name, t in draft.trained().items()}
    with building(out) as work:
        save_file({**tensors, "vocab": draft.vocab.cpu().contiguous()}, str(work / WEIGHTS_NAME))
        (work / CARD_NAME).write_text(json.dumps({"format": FORMAT, **card}, indent=2) + "\n")
    return out


def load_eagle(path: str | os.PathLike, model: torch.nn.Module, model_dir: str | os.PathLike
               ) -> tuple[EagleDraft, dict[str, Any]]:
    """The draft at `path` on the target `model` (loaded from `model_dir`), after checking that
    the card names this target's weights; output rows and embeddings come from the target."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = eagle_folder(path)
    card = read_card(folder)
    fingerprint = weights_fingerprint(model_dir)
    trained_for = card.get("target", {})
    if trained_for.get("weights_sha256") != fingerprint:
        raise SpecdecError(f"feature draft {str(folder)!r} was trained for target {trained_for.get('name')!r} "
                           f"(weights {str(trained_for.get('weights_sha256'))[:12]}), not for "
                           f"{str(Path(model_dir).name)!r} (weights {fingerprint[:12]})")
    try:
        tensors = load_file(str(folder / WEIGHTS_NAME))
    except (SafetensorError, OSError) as exc:
        raise SpecdecError(f"cannot read {str(folder / WEIGHTS_NAME)!r}: {exc}") from None
    vocab = tensors.pop("vocab", None)
    rows = model.get_output_embeddings().weight.shape[0]
    if vocab is None or vocab.ndim != 1 or vocab.numel() == 0 or int(vocab.min()) < 0 or int(vocab.max()) >= rows:
        raise SpecdecError(f"{str(folder / WEIGHTS_NAME)!r} holds no vocabulary of ids below {rows}")
    draft = draft_on(model, vocab)
    expected = {name: tuple(p.shape) for name, p in draft.trained().items()}
    found = {name: tuple(t.shape) for name, t in tensors.items()}
    if found != expected:
        raise SpecdecError(f"{str(folder / WEIGHTS_NAME)!r} does not hold a feature draft for this target's shapes")
    with torch.no_grad():
        for name, p in draft.trained().items():
            p.copy_(tensors[name])
    return draft.eval(), card
