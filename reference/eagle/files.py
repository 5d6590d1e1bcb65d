"""Where a trained feature draft lives on disk (torch-free, so the command line checks an
`eagle:PATH` before any model loads): a folder with `eagle.safetensors` and `card.json`."""
from __future__ import annotations

import os
from pathlib import Path

from specdec.reference.heads.files import trained_folder

WEIGHTS_NAME = "eagle.safetensors"


def eagle_folder(path: str | os.PathLike) -> Path:
    """The folder for a path given on the command line (the folder or its safetensors file); a
    one-line FileNotFoundError when a file is missing."""
    return trained_folder(path, WEIGHTS_NAME, "feature draft", "make one with `specdec eagle train`")
