"""Where trained heads live on disk (torch-free, so the command line checks a heads path before
any model loads): a folder with `heads.safetensors` and `card.json`."""
from __future__ import annotations

import os
from pathlib import Path

WEIGHTS_NAME = "heads.safetensors"
CARD_NAME = "card.json"


def heads_folder(path: str | os.PathLike) -> Path:
    """The heads folder for a path given on the command line (the folder or its safetensors
    file); a one-line FileNotFoundError when either file is missing."""
    return trained_folder(path, WEIGHTS_NAME, "heads", "make them with `specdec heads train`")


def trained_folder(path: str | os.PathLike, weights_name: str, what: str, hint: str) -> Path:
    """The folder of something trained on the target (weights_name + card.json) for a path given
    on the command line (the folder or its weights file); a one-line FileNotFoundError naming
    `what` when a file is missing."""
    path = Path(path)
    folder = path.parent if path.is_file() else path
    for name in (weights_name, CARD_NAME):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{str(folder)!r} holds no {what}: {name} is missing ({hint})")
    return folder
