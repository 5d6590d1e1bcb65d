"""Heads on disk: a folder with `heads.safetensors` (the trained weights and the vocabulary) and
`card.json` (the target they belong to, by a hash of its weight files; how they were trained;
their held-out quality). Loading heads for another target is refused in one line.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from specdec.errors import SpecdecError
from specdec.paths import building
from specdec.reference.heads.files import CARD_NAME, FORMAT, WEIGHTS_NAME, card_in, heads_folder
from specdec.reference.heads.files import read_card  # noqa: F401 (re-exported: the heads' card)
from specdec.reference.heads.model import BlockHeads

WEIGHT_SUFFIXES = (".safetensors", ".bin")


def weights_fingerprint(model_dir: str | os.PathLike) -> str:
    """sha256 over the target folder's weight files (name and bytes, in name order)."""
    files = sorted(p for p in Path(model_dir).iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"no weight files (*.safetensors, *.bin) in {str(model_dir)!r}")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def save_heads(heads: BlockHeads, card: dict[str, Any], out: str | os.PathLike, force: bool = False) -> Path:
    """Write the heads and their card into `out`, built beside it and renamed into place."""
    return save_trained({"weight": heads.weight, "bias": heads.bias, "vocab": heads.vocab}, card, out, WEIGHTS_NAME,
                        FORMAT, force)


def save_trained(tensors: dict[str, torch.Tensor], card: dict[str, Any], out: str | os.PathLike, weights_name: str,
                 fmt: str, force: bool = False) -> Path:
    """Write `tensors` (safetensors `weights_name`) and the `fmt` card into `out`, built beside it
    and renamed into place; an existing non-empty `out` only with force."""
    from safetensors.torch import save_file

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} already exists and is not empty: pass --force to replace it")
    with building(out) as work:
        save_file({k: t.detach().cpu().contiguous() for k, t in tensors.items()}, str(work / weights_name))
        (work / CARD_NAME).write_text(json.dumps({"format": fmt, **card}, indent=2) + "\n")
    return out


def check_trained_for(card: dict[str, Any], folder: Path, model_dir: str | os.PathLike, what: str) -> None:
    """A one-line refusal unless the card names the weights in model_dir (their sha256)."""
    fingerprint = weights_fingerprint(model_dir)
    trained_for = card.get("target", {})
    if trained_for.get("weights_sha256") != fingerprint:
        verb = "were" if what.endswith("s") else "was"
        raise SpecdecError(f"{what} {str(folder)!r} {verb} trained for target {trained_for.get('name')!r} "
                           f"(weights {str(trained_for.get('weights_sha256'))[:12]}), not for "
                           f"{str(Path(model_dir).name)!r} (weights {fingerprint[:12]})")


def load_trained(folder: Path, fmt: str, weights_name: str, model: torch.nn.Module, model_dir: str | os.PathLike,
                 what: str) -> tuple[dict[str, Any], dict[str, torch.Tensor], torch.Tensor]:
    """(card, tensors, vocabulary) of a trained drafter's checked folder for the target `model`
    (loaded from `model_dir`): the card must be a `fmt` card naming this target's weights, the
    weights file must read, and its "vocab" (taken out of the tensors) must be ids of the
    target's output layer."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    card = card_in(folder, fmt)
    check_trained_for(card, folder, model_dir, what)
    try:
        tensors = load_file(str(folder / weights_name))
    except (SafetensorError, OSError) as exc:
        raise SpecdecError(f"cannot read {str(folder / weights_name)!r}: {exc}") from None
    vocab = tensors.pop("vocab", None)
    rows = model.get_output_embeddings().weight.shape[0]
    if vocab is None or vocab.ndim != 1 or vocab.numel() == 0 or int(vocab.min()) < 0 or int(vocab.max()) >= rows:
        raise SpecdecError(f"{str(folder / weights_name)!r} holds no vocabulary of ids below {rows}")
    return card, tensors, vocab


def load_heads(path: str | os.PathLike, model: torch.nn.Module, model_dir: str | os.PathLike
               ) -> tuple[BlockHeads, dict[str, Any]]:
    """The heads at `path` on the target `model` (loaded from `model_dir`), after checking that
    the card names this target's weights; the output rows are taken from the target itself."""
    folder = heads_folder(path)
    card, tensors, vocab = load_trained(folder, FORMAT, WEIGHTS_NAME, model, model_dir, "heads")
    weight, bias = tensors.get("weight"), tensors.get("bias")
    d = model.get_output_embeddings().weight.shape[1]
    if weight is None or bias is None or weight.ndim != 3 or weight.shape[0] < 1 or weight.shape[1:] != (d, 2 * d) \
            or bias.shape != (weight.shape[0], d):
        raise SpecdecError(f"{str(folder / WEIGHTS_NAME)!r} does not hold heads for a target of hidden size {d}")
    heads = heads_on(model, vocab, weight.shape[0])
    with torch.no_grad():
        heads.weight.copy_(weight)
        heads.bias.copy_(bias)
    return heads.eval(), card


def heads_on(model: torch.nn.Module, vocab: torch.Tensor, n_heads: int) -> BlockHeads:
    """Untrained heads (every head = the target's own next-token prediction) on `model`, on its device."""
    out_layer = model.get_output_embeddings().weight
    device = out_layer.device
    vocab = vocab.to(device)
    return BlockHeads(n_heads, vocab, out_layer.detach()[vocab], model.get_input_embeddings().weight).to(device)
