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
    path = Path(path)
    folder = path.parent if path.is_file() else path
    for name in (WEIGHTS_NAME, CARD_NAME):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{str(folder)!r} holds no heads: {name} is missing "
                                    "(make them with `specdec heads train`)")
    return folder
