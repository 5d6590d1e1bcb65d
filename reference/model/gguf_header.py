"""A GGUF file's header read without loading it, every size bounded before it is used, and the
check that the file is a whole model of an architecture specdec decodes (issue 53: a GGUF that
is only a header, or a state-space model, was converted into random weights and cached).

Layout (llama.cpp's docs/gguf.md, `gguf-py`'s GGUFReader): magic "GGUF", version (uint32),
tensor count and metadata count (uint64), the metadata key/value pairs (key: a string; value:
a type id and the value, arrays as element type, count, elements), then per tensor its name,
dimension count, dimensions, type and offset. Strings are a uint64 length and UTF-8 bytes;
everything is little-endian. Pure Python over a buffered file: no tensor data is read.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from specdec.errors import SpecdecError

MAX_STRING = 1 << 20  # bytes in one metadata string or tensor name
MAX_ARRAY = 1 << 24  # elements in one metadata array (a tokenizer's vocabulary: ~10^5)
MAX_KEYS = 1 << 16
MAX_TENSORS = 1 << 20
MAX_DIMS = 8
# value type id -> struct format (fixed-size types); 8 string, 9 array
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
# GGUF architectures transformers maps to a causal LM whose decoder has attention and a KV cache,
# with llama.cpp's blk.N.* tensor names (state-space and encoder-decoder models are left out)
DECODERS = frozenset({"llama", "mistral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3",
                      "stablelm", "starcoder2", "falcon", "gpt2", "bloom", "nemotron"})


@dataclass(frozen=True)
class GgufHeader:
    version: int
    architecture: str | None  # general.architecture
    block_count: int | None  # {architecture}.block_count
    tensors: frozenset[str]  # tensor names


def read_header(path: str | Path) -> GgufHeader:
    """The header of a GGUF file, or a one-line SpecdecError naming the file and what is wrong."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            return _read(f)
    except (struct.error, EOFError) as exc:
        raise SpecdecError(f"{str(path)!r}: its GGUF header is cut short ({exc})") from None
    except UnicodeDecodeError:
        raise SpecdecError(f"{str(path)!r}: its GGUF header holds a string that is not UTF-8") from None
    except _Bad as exc:
        raise SpecdecError(f"{str(path)!r}: {exc}") from None


def missing_parts(header: GgufHeader) -> str | None:
    """Why the file is not a whole model specdec decodes, or None: its architecture is one of
    DECODERS, it states its block count, and it holds the token embedding, the final norm and, in
    every block, the attention's query (or fused qkv) and output projections and the MLP's down
    projection (dense or experts)."""
    arch = header.architecture
    if arch not in DECODERS:
        return (f"architecture {arch!r} is not one specdec decodes (a transformer with a KV cache: "
                f"{', '.join(sorted(DECODERS))})")
    if header.block_count is None:
        return f"it states no {arch}.block_count"
    names = header.tensors
    if not names:
        return "it holds no tensors (a header only): every weight would be random"
    missing = [n for n in ("token_embd.weight", "output_norm.weight") if n not in names]
    for i in range(header.block_count):
        need = [(f"blk.{i}.attn_q.weight", f"blk.{i}.attn_qkv.weight"), (f"blk.{i}.attn_output.weight",),
                (f"blk.{i}.ffn_down.weight", f"blk.{i}.ffn_down_exps.weight")]
        missing += [alts[0] for alts in need if not any(a in names for a in alts)]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        return (f"it lacks {len(missing)} of the tensors a {header.block_count}-block {arch} needs "
                f"({', '.join(missing[:3])}{more}): those weights would be random")
    return None


class _Bad(Exception):
    """A header field out of its bounds (said in one line)."""


def _read(f: BinaryIO) -> GgufHeader:
    if f.read(4) != b"GGUF":
        raise _Bad("not a GGUF file (no GGUF magic)")
    version = _unpack(f, "I")
    if version not in (2, 3):
        raise _Bad(f"GGUF version {version} is not 2 or 3")
    tensors, keys = _unpack(f, "Q"), _unpack(f, "Q")
    if tensors > MAX_TENSORS or keys > MAX_KEYS:
        raise _Bad(f"its header claims {tensors} tensors and {keys} metadata keys (at most {MAX_TENSORS} and "
                   f"{MAX_KEYS} are read)")
    meta: dict[str, object] = {}
    for _ in range(keys):
        key = _string(f)
        meta[key] = _value(f, _unpack(f, "I"))
    names = set()
    for _ in range(tensors):
        names.add(_string(f))
        dims = _unpack(f, "I")
        if dims > MAX_DIMS:
            raise _Bad(f"a tensor claims {dims} dimensions (at most {MAX_DIMS})")
        f.read(8 * dims + 4 + 8)  # dimensions, type, offset
    arch = meta.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    blocks = meta.get(f"{arch}.block_count") if arch else None
    blocks = blocks if isinstance(blocks, int) and not isinstance(blocks, bool) and 0 < blocks <= 4096 else None
    return GgufHeader(version, arch, blocks, frozenset(names))


def _unpack(f: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) < size:
        raise EOFError("end of file")
    return struct.unpack("<" + fmt, data)[0]


def _string(f: BinaryIO) -> str:
    n = _unpack(f, "Q")
    if n > MAX_STRING:
        raise _Bad(f"a string claims {n} bytes (at most {MAX_STRING})")
    data = f.read(n)
    if len(data) < n:
        raise EOFError("end of file")
    return data.decode("utf-8")


def _value(f: BinaryIO, kind: int) -> object:
    """One metadata value; arrays are skipped past (None), except that their sizes are checked."""
    if kind in SCALARS:
        return _unpack(f, SCALARS[kind])
    if kind == STRING:
        return _string(f)
    if kind != ARRAY:
        raise _Bad(f"a metadata value has the unknown type {kind}")
    item, count = _unpack(f, "I"), _unpack(f, "Q")
    if count > MAX_ARRAY:
        raise _Bad(f"a metadata array claims {count} elements (at most {MAX_ARRAY})")
    if item in SCALARS:
        size = struct.calcsize(SCALARS[item]) * count
        if len(f.read(size)) < size:
            raise EOFError("end of file")
    elif item == STRING:
        for _ in range(count):
            _string(f)
    else:
        raise _Bad(f"a metadata array holds the type {item}, which is not read")
    return None
