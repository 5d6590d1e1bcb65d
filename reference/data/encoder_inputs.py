"""Prompts for encoder-decoder targets: texts for the encoder (T5, BART, Marian), or precomputed
encoder inputs read from a file for encoders that do not take text (Whisper's log-mel features).

A features file is a `.npy` array or a `.pt` tensor (loaded without pickles), one example of
shape [F, T] or a batch [N, F, T]; it is checked against the target's config before any
weights load (Whisper: F = num_mel_bins, T = 2 x max_source_positions). docs/encoder-decoder.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.reference.core.prompt import TokenPrompt
from specdec.reference.model.seq2seq import text_prompts

MAX_FEATURE_BYTES = 4 << 30  # refuse bigger files before reading them


def read_encoder_inputs(path: str | Path) -> torch.Tensor:
    """The examples of a features file as float32 [N, ...] (a single [F, T] example becomes N = 1)."""
    path = Path(path)
    if not path.is_file():
        raise SpecdecError(f"{str(path)!r} is not a file")
    if path.stat().st_size > MAX_FEATURE_BYTES:
        raise SpecdecError(f"{str(path)!r} is larger than {MAX_FEATURE_BYTES >> 30} GiB")
    try:
        if path.suffix == ".npy":
            array = torch.from_numpy(np.load(path, allow_pickle=False))
        elif path.suffix == ".pt":
            array = torch.load(path, map_location="cpu", weights_only=True)
        else:
            raise SpecdecError(f"{str(path)!r}: give a .npy or .pt file")
    except SpecdecError:
        raise
    except Exception as exc:  # numpy and torch raise many types for a corrupt file
        first = (str(exc).splitlines() or [""])[0]
        raise SpecdecError(f"cannot read {str(path)!r}: {type(exc).__name__}: {first}") from None
    if not isinstance(array, torch.Tensor) or not (array.is_floating_point() or array.dtype == torch.int64):
        raise SpecdecError(f"{str(path)!r} holds no numeric array (a tensor of floats is expected)")
    if array.dim() not in (2, 3) or array.numel() == 0:
        raise SpecdecError(f"{str(path)!r}: expected one example [F, T] or a batch [N, F, T], got shape "
                           f"{tuple(array.shape)}")
    array = array.float()
    if not torch.isfinite(array).all():
        raise SpecdecError(f"{str(path)!r} contains NaN or infinite values")
    return array if array.dim() == 3 else array[None]


def check_feature_shape(features: torch.Tensor, model_dir: str | Path) -> None:
    """Refuse features whose shape the target's encoder cannot take (read from config.json)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    bins, positions = config.get("num_mel_bins"), config.get("max_source_positions")
    if isinstance(bins, int) and features.shape[1] != bins:
        raise SpecdecError(f"features have {features.shape[1]} rows per frame; the encoder takes num_mel_bins = {bins}")
    if isinstance(positions, int) and isinstance(bins, int) and features.shape[2] != 2 * positions:
        raise SpecdecError(f"features have {features.shape[2]} frames; the encoder takes 2 x max_source_positions = "
                           f"{2 * positions}")


def feature_prompt_set(model, features: torch.Tensor, path: str | Path):
    """A `PromptSet` of one prompt per row of `features` (category "features"); model: the loaded
    model, or its config.json as a dict (preflight, nothing loaded)."""
    from specdec.reference.model.seq2seq import decoder_start
    from specdec.reference.data.prompts import PromptSet

    if isinstance(model, dict):
        start = model.get("decoder_start_token_id")
        if not isinstance(start, int):
            raise SpecdecError("the target's config.json names no decoder_start_token_id")
        name, start = "input_features", [start]
    else:
        name, start = model.main_input_name, decoder_start(model)
    prompts = [TokenPrompt(start, {name: row}) for row in features]
    return PromptSet(prompts, [f"{Path(path).name}[{i}]" for i in range(len(prompts))], ["features"] * len(prompts))


def reads_features(path: str | Path) -> bool:
    """Whether the folder's model is an encoder-decoder whose encoder reads features, not text
    (from its config; SpecdecError when the config cannot be read)."""
    from transformers import AutoModelForSpeechSeq2Seq

    from specdec.reference.model.models import model_class
    from specdec.reference.model.seq2seq import folder_is_encoder_decoder

    return folder_is_encoder_decoder(path) and model_class(Path(path)) is AutoModelForSpeechSeq2Seq


def preflight_feature_prompts(path: str | Path, encoder_inputs: Path | None, features_in: bool):
    """The prompts a features file gives the folder's model (`reads_features`: `features_in`),
    checked before any model loads: a `PromptSet`, or None for text prompts. SpecdecError when
    the file is given to a model that reads text, missing for one that reads features, or does
    not fit the encoder."""
    from specdec.reference.model.seq2seq import folder_is_encoder_decoder

    if encoder_inputs is None:
        if features_in:
            raise SpecdecError(f"{str(path)!r} is an encoder-decoder whose encoder reads features, not text: give its "
                               "inputs as a .npy/.pt file")
        return None
    if not features_in:
        what = "a text encoder-decoder: give text prompts" if folder_is_encoder_decoder(path) else "a causal LM"
        raise SpecdecError(f"{str(path)!r} is {what}; encoder inputs are for encoders that read features")
    features = read_encoder_inputs(encoder_inputs)
    check_feature_shape(features, path)
    return feature_prompt_set(json.loads((Path(path) / "config.json").read_text()), features, encoder_inputs)


def text_ids(path: str | Path, tokenizer, text: str) -> tuple[list[int], int]:
    """A text's ids as the folder's model takes them before `model_prompts`, and the positions
    its decoder's prompt takes: a causal LM's ids (with the tokenizer's special tokens) are its
    decoder's prompt; an encoder-decoder's text goes to its encoder (`text_prompts` adds the
    special tokens) and its decoder starts from one start token. ([], 0) for no tokens."""
    from specdec.reference.model.seq2seq import folder_is_encoder_decoder

    seq2seq = folder_is_encoder_decoder(path)
    ids = list(tokenizer(text, add_special_tokens=not seq2seq)["input_ids"])
    return ids, (1 if seq2seq and ids else len(ids))


def load_target_prompts(target, n: int, source):
    """Up to n prompts per category of `source` (a `PromptSource`) as `target` (a LoadedModel)
    decodes them: `model_prompts` of the encoded texts, or the first n rows of its encoder inputs."""
    from dataclasses import replace

    from specdec.reference.data.prompts import load_prompt_set

    if source.encoder_inputs is not None:
        features = read_encoder_inputs(source.encoder_inputs)[:n]
        check_feature_shape(features, target.path)
        return feature_prompt_set(target.model, features, source.encoder_inputs)
    prompt_set = load_prompt_set(target.tokenizer, target.path, n, source)
    return replace(prompt_set, ids=model_prompts(target, prompt_set.ids))


def model_prompts(loaded, ids: list[list[int]]) -> list[list[int]]:
    """The prompts `loaded` (a LoadedModel) decodes from texts' ids: unchanged for a causal LM; for
    an encoder-decoder, each text's ids to its encoder (the decoder starting from its start token)."""
    from specdec.reference.model.seq2seq import is_encoder_decoder

    return text_prompts(loaded.model, loaded.tokenizer, ids) if is_encoder_decoder(loaded.model) else ids
