"""A Hugging Face model folder checked from its files alone (torch-free, so a command refuses a
bad --target before torch or transformers is imported): a config, weights and tokenizer files
present, and the position limit its config.json states."""
from __future__ import annotations

from pathlib import Path

from specdec.strict_json import loads

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model",
                   "tokenizer_config.json")  # the last: byte-level tokenizers (ByT5) need no vocabulary file


def check_model_folder(path: str | Path) -> Path:
    """The folder, if it holds a config, weights and tokenizer files; else a one-line ValueError
    naming what is missing (checked before anything heavy loads)."""
    path = Path(path)
    if not path.is_dir() or not (path / "config.json").is_file():
        raise FileNotFoundError(f"model path {str(path)!r} is not a Hugging Face model folder "
                                "(no config.json there)")
    missing = [f"no {what} in {str(path)!r} (expected one of {', '.join(names)})"
               for what, names in (("tokenizer files", TOKENIZER_FILES), ("weights", WEIGHT_FILES))
               if not any((path / name).is_file() for name in names)]
    if missing:
        raise FileNotFoundError("; ".join(missing))
    return path


def context_limit(path: str | Path) -> int | None:
    """The model's position limit (config.json's max_position_embeddings / n_positions), read
    without loading the model; None when the config states none."""
    config = loads((Path(path) / "config.json").read_text())
    for key in ("max_target_positions", "max_position_embeddings", "n_positions", "max_sequence_length"):
        if isinstance(config.get(key), int) and config[key] > 0:
            return int(config[key])
    return None


def folder_is_encoder_decoder(path: str | Path) -> bool:
    """From config.json alone (nothing loaded)."""
    import json

    try:
        return bool(json.loads((Path(path) / "config.json").read_text()).get("is_encoder_decoder", False))
    except (OSError, ValueError, AttributeError):
        return False


def require_causal(path: str | Path, what: str) -> None:
    """Refuse (SpecdecError) an encoder-decoder folder where `what` needs a causal LM."""
    from specdec.errors import SpecdecError

    if folder_is_encoder_decoder(path):
        raise SpecdecError(f"{str(path)!r} is an encoder-decoder; {what} needs a causal LM (docs/encoder-decoder.md)")
