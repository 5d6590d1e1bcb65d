"""Where trained heads live on disk (torch-free, so the command line checks a heads path before
any model loads): a folder with `heads.safetensors` and `card.json`."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from specdec.errors import SpecdecError
from specdec.inputs import read_json

WEIGHTS_NAME = "heads.safetensors"
FORMAT = "specdec-heads/1"  # the heads' card.json
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


def card_in(folder: Path, fmt: str) -> dict[str, Any]:
    """The card.json of a checked folder (the bounded reader, `specdec.inputs.read_json`),
    refused in one line unless it is a `fmt` card."""
    card = read_json(folder / CARD_NAME)
    if not isinstance(card, dict) or card.get("format") != fmt:
        raise SpecdecError(f"{str(folder / CARD_NAME)!r} is not a {fmt} card")
    return card


def read_card(path: str | os.PathLike) -> dict[str, Any]:
    """The card of the heads at a command-line path (`heads_folder`), torch-free."""
    return card_in(heads_folder(path), FORMAT)
