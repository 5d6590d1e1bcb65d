"""GGUF files as models: checked without loading them, converted once into a float32
safetensors folder in the cache (config, tokenizer, weights), then loaded as any model folder.

transformers dequantizes a GGUF to float32 as it loads it; the folder keeps those values, so a
model loaded from it in float32, or cast to the dtype asked for, is what `from_pretrained(folder,
gguf_file=name, dtype=...)` gives. The method and its limits are in docs/decoder.md ("Models
from GGUF files"). Imports no torch until a file is converted.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import re
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.paths import building, models_dir

GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
NOTE = ("note: {name} is dequantized to float32 once ({folder}): alpha is measured against these weights; "
        "llama.cpp's arithmetic on the quantized blocks is not reproduced")


def is_gguf(path: str | Path) -> bool:
    """Whether `path` names a GGUF file (by its suffix; its contents are checked by `check_gguf`)."""
    return Path(path).suffix.lower() == ".gguf"


def check_gguf(path: str | Path) -> Path:
    """The file, if it exists, starts with the GGUF magic, is a whole model of an architecture
    specdec decodes (its header read with every size bounded: `gguf_header`; checked every time,
    so a conversion is never reused for a file that is not one) and states an architecture
    transformers loads as a causal LM (skipped once converted); else a one-line SpecdecError
    naming the file and the problem. No tensor is loaded."""
    path = Path(path)
    if not path.is_file():
        raise SpecdecError(f"{str(path)!r}: no such GGUF file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise SpecdecError(f"{str(path)!r} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")
    problem = _incomplete(str(path.resolve()), *_stamp(path))  # also before a conversion is reused
    converted = (gguf_folder(path) / "config.json").is_file()
    if problem is None and not converted:
        problem = _unloadable(str(path.resolve()), *_stamp(path))
    if problem is not None:
        raise SpecdecError(f"{str(path)!r}: {problem}")
    return path


def gguf_folder(path: str | Path) -> Path:
    """The cache folder of a GGUF file's conversion: `models/gguf-<name>-<12 hex digits>`, a sha256
    of the file's size, modification time and header (its first MiB: the metadata), not of the
    whole file (a 40 GB model would be read on every command)."""
    path = Path(path)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem)
    return models_dir() / f"gguf-{name}-{_digest(str(path.resolve()), *_stamp(path))}"


def convert_gguf(src: Path, out: Path) -> bool:
    """Convert the GGUF file `src` to a float32 safetensors folder `out` (config, tokenizer, weights),
    built beside it and renamed into place; idempotent, and one process at a time (a lock file
    beside `out`: torchrun's ranks wait for the first). Returns whether it converted (False: `out`
    already held the model)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "config.json").is_file():
            return False
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        try:
            tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
            # dequantize=True: a dense model even where transformers could keep the blocks packed
            model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32,
                                                         quantization_config=GgufConfig(dequantize=True))
        except Exception as exc:  # transformers raises many types for a file it cannot read
            text = str(exc).strip().splitlines() or [type(exc).__name__]
            raise SpecdecError(f"cannot convert {str(src)!r}: {type(exc).__name__}: {text[0]}") from exc
        # a plain float32 model from here on: transformers 5 refuses to save "gguf-quantized" ones
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        with building(out) as work:
            model.save_pretrained(work)
            tokenizer.save_pretrained(work)
        return True


def model_folder(path: str | Path) -> Path:
    """The model folder `path` names: itself, or for a .gguf file its converted folder (checked,
    and converted on first use with a one-line note on stderr)."""
    if not is_gguf(path):
        return Path(path)
    src = check_gguf(path)
    out = gguf_folder(src)
    if convert_gguf(src, out):
        from specdec.reference.core.progress import phase
        phase(NOTE.format(name=src.name, folder=out))
    return out


def _stamp(path: Path) -> tuple[int, int]:
    """(size, modification time in ns): the key under which a file's digest and check are reused."""
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=None)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """12 hex digits of sha256(size, mtime, the first MiB) (once per process and file version)."""
    with open(path, "rb") as f:
        head = f.read(2**20)
    return hashlib.sha256(f"{size}:{mtime_ns}:".encode() + head).hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def _incomplete(path: str, size: int, mtime_ns: int) -> str | None:
    """Why the file is not a whole model specdec decodes (`gguf_header.missing_parts`), or None."""
    from specdec.reference.model.gguf_header import missing_parts, read_header

    return missing_parts(read_header(path))


@functools.lru_cache(maxsize=None)
def _unloadable(path: str, size: int, mtime_ns: int) -> str | None:
    """Why transformers cannot load the file as a causal LM, or None: it builds the config from the
    file's metadata as `from_pretrained` does first (no tensor is read)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        config = AutoConfig.from_pretrained(Path(path).parent, gguf_file=Path(path).name)
    except Exception as exc:  # ValueError for an unsupported architecture, others for a broken header
        text = str(exc).strip().splitlines() or [type(exc).__name__]
        return f"transformers cannot load this GGUF file: {text[0]}"
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        return f"its architecture ({config.model_type}) is not a causal LM transformers loads"
    return None
