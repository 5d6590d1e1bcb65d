"""A Llama model folder as a GGUF file llama.cpp loads (`-m`, or `-md` as a draft model),
written with the `gguf` package.

The tensors are renamed to llama.cpp's names, and the query and key projections permuted from
Hugging Face's rotary layout (halves) to GGUF's (interleaved pairs), as llama.cpp's own
`convert_hf_to_gguf.py` does; transformers undoes the permutation when it loads a GGUF, so the
file also loads as `model:FILE.gguf`. The vocabulary (tokens, merges, pre-tokenizer, special
ids, chat template) is copied from a GGUF file of the target, so llama.cpp sees exactly the
target's vocabulary and accepts the pair. Tied output layers are written once (llama.cpp reads
`token_embd` as the output when `output.weight` is absent).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from specdec.errors import SpecdecError
from specdec.paths import writing

TYPES = ("f32", "f16", "q8_0")  # tensor types of the 2-D weights; norms stay float32
FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7}  # general.file_type (llama.cpp's LLAMA_FTYPE_*)
LAYER_NAMES = {  # Hugging Face name (after "model.layers.N.") -> llama.cpp name (after "blk.N.")
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """Rows of a q or k projection [n_head * head_dim, d] from halves-rotary to pairs-rotary order
    (llama.cpp's `LlamaModel.permute`)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def gguf_name(name: str) -> str | None:
    """llama.cpp's name of a Hugging Face Llama tensor; None for the tied output layer."""
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    if name == "lm_head.weight":
        return "output.weight"
    parts = name.split(".")
    if parts[:2] == ["model", "layers"] and ".".join(parts[3:]) in LAYER_NAMES:
        return f"blk.{parts[2]}.{LAYER_NAMES['.'.join(parts[3:])]}"
    raise SpecdecError(f"{name}: not a tensor of a Llama model")


def read_tensors(folder: Path) -> dict[str, np.ndarray]:
    """The folder's float weights as float32 arrays (one safetensors file)."""
    from safetensors.torch import load_file  # through torch: bfloat16 has no numpy dtype

    path = folder / "model.safetensors"
    if not path.is_file():
        raise SpecdecError(f"{str(folder)!r}: no model.safetensors (a sharded or .bin model is not exported)")
    return {k: v.float().numpy() for k, v in load_file(str(path)).items()}


def vocabulary_fields(tokenizer_gguf: Path) -> list[tuple[str, object, object, object]]:
    """(key, value, type, sub-type) of every tokenizer.* field of a GGUF file."""
    from gguf import GGUFReader, GGUFValueType

    fields = []
    for key, field in GGUFReader(tokenizer_gguf).fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        fields.append((key, field.contents(), kind, sub))
    if not any(k == "tokenizer.ggml.tokens" for k, *_ in fields):
        raise SpecdecError(f"{str(tokenizer_gguf)!r} holds no vocabulary (tokenizer.ggml.tokens)")
    return fields


def export_gguf(folder: str | os.PathLike, out: str | os.PathLike, tokenizer_gguf: str | os.PathLike,
                tensor_type: str = "f32", name: str | None = None) -> Path:
    """Write the Llama model folder `folder` as the GGUF file `out` (atomically), its vocabulary
    from `tokenizer_gguf` (a GGUF file of the target); 2-D weights as `tensor_type`."""
    import gguf

    folder, out, tokenizer_gguf = Path(folder), Path(out), Path(tokenizer_gguf)
    if tensor_type not in TYPES:
        raise SpecdecError(f"tensor type {tensor_type!r}: choose one of {', '.join(TYPES)}")
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise SpecdecError(f"{str(folder)!r} is a {config.get('model_type')!r} model; only Llama models are exported")
    vocab = vocabulary_fields(tokenizer_gguf)
    tokens = next(v for k, v, *_ in vocab if k == "tokenizer.ggml.tokens")
    if len(tokens) != config["vocab_size"]:
        raise SpecdecError(f"{str(tokenizer_gguf)!r} has {len(tokens)} tokens, the model {config['vocab_size']} rows")
    heads, kv_heads = config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rope = config.get("rope_parameters") or {}
    if rope.get("rope_type", "default") != "default":
        raise SpecdecError(f"{str(folder)!r}: rope type {rope.get('rope_type')!r} is not exported (default rope only)")
    tensors = read_tensors(folder)

    with writing(out) as tmp:
        w = gguf.GGUFWriter(tmp, "llama")
        w.add_name(name or folder.name)
        w.add_context_length(config["max_position_embeddings"])
        w.add_embedding_length(config["hidden_size"])
        w.add_block_count(config["num_hidden_layers"])
        w.add_feed_forward_length(config["intermediate_size"])
        w.add_head_count(heads)
        w.add_head_count_kv(kv_heads)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_rope_dimension_count(head_dim)
        w.add_rope_freq_base(float(rope.get("rope_theta", config.get("rope_theta", 10000.0))))
        w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
        w.add_vocab_size(config["vocab_size"])
        w.add_file_type(FILE_TYPES[tensor_type])
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for key, value, kind, sub in vocab:
            w.add_key_value(key, value, kind, sub_type=sub)
        for hf_name, array in tensors.items():
            if hf_name == "lm_head.weight" and config.get("tie_word_embeddings", False):
                continue
            target_name = gguf_name(hf_name)
            if hf_name.endswith("q_proj.weight"):
                array = permute(array, heads)
            elif hf_name.endswith("k_proj.weight"):
                array = permute(array, kv_heads)
            add_tensor(w, target_name, np.ascontiguousarray(array), tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return out


def add_tensor(writer, name: str, array: np.ndarray, tensor_type: str) -> None:
    """One tensor: 1-D (norms) always float32; 2-D as `tensor_type` (Q8_0 blocks of 32 along
    rows: a row length not divisible by 32 stays float16)."""
    import gguf

    if array.ndim == 1 or tensor_type == "f32":
        writer.add_tensor(name, array.astype(np.float32))
    elif tensor_type == "q8_0" and array.shape[-1] % 32 == 0:
        data = gguf.quants.quantize(array.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
        writer.add_tensor(name, array.astype(np.float16))


def source_problem(folder: str | os.PathLike, tokenizer_gguf: str | os.PathLike) -> str | None:
    """Why `tokenizer_gguf` is not the target whose vocabulary the draft in `folder` needs, or None.
    With a draft card (`specdec draft train`): the GGUF's shape (layers, width, ids) against the
    card's target, and, where the GGUF's conversion is cached, its weights against the card's
    hash; with a tokenizer.json (train copies the target's): its tokens, id by id. Any other
    Llama folder is checked on its vocabulary size alone (by `export_gguf`)."""
    from gguf import GGUFReader

    from specdec.inputs import read_json

    folder, tokenizer_gguf = Path(folder), Path(tokenizer_gguf)
    fields = GGUFReader(tokenizer_gguf).fields

    def field(key: str) -> object:
        return fields[key].contents() if key in fields else None

    arch = field("general.architecture")
    tokens = field("tokenizer.ggml.tokens") or []
    card = read_json(folder / "card.json") if (folder / "card.json").is_file() else None
    target = card.get("target") if isinstance(card, dict) else None
    if isinstance(target, dict):
        theirs = {"layers": field(f"{arch}.block_count"), "hidden_size": field(f"{arch}.embedding_length"),
                  "vocab_size": len(tokens)}
        if any(key in target and target[key] != value for key, value in theirs.items()):
            return (f"the draft was distilled from {target.get('name')!r} ({target.get('layers')} layers, width "
                    f"{target.get('hidden_size')}, {target.get('vocab_size')} ids); {tokenizer_gguf.name} is a "
                    f"{arch!r} of {theirs['layers']} layers, width {theirs['hidden_size']}, {theirs['vocab_size']} ids: give "
                    "that target's own GGUF (--vocab-from)")
        converted = conversion(tokenizer_gguf)
        if converted is not None and "weights_sha256" in target:
            from specdec.reference.heads.store import weights_fingerprint
            if weights_fingerprint(converted) != target["weights_sha256"]:
                return (f"{tokenizer_gguf.name}'s weights (converted in {str(converted)!r}) are not those of "
                        f"{target.get('name')!r}, the target the draft was distilled from (the card's sha256 differs)")
    if (folder / "tokenizer.json").is_file():
        ours = tokenizer_tokens(read_json(folder / "tokenizer.json"))
        if ours is not None and ours != list(tokens):
            at = next((i for i, (a, b) in enumerate(zip(ours, tokens)) if a != b), min(len(ours), len(tokens)))
            return (f"{tokenizer_gguf.name}'s vocabulary is not the draft's tokenizer.json's ({len(tokens)} vs "
                    f"{len(ours)} tokens, the first difference at id {at}): give the target's own GGUF (--vocab-from)")
    return None


def conversion(path: Path) -> Path | None:
    """The cached float32 conversion of the GGUF file `path` (the default target's own folder for
    the embedded GGUF), or None when there is none yet."""
    from specdec.paths import default_target_dir
    from specdec.reference.model.gguf import gguf_folder
    from specdec.reference.data.default_model import DefaultModelMissing, gguf_path

    try:
        default = path.resolve() == gguf_path().resolve()
    except DefaultModelMissing:
        default = False
    folder = default_target_dir() if default else gguf_folder(path)
    return folder if (folder / "model.safetensors").is_file() else None


def tokenizer_tokens(tokenizer: object) -> list[str] | None:
    """A Hugging Face tokenizer.json's tokens by id (its model's vocabulary and the added
    tokens), or None when it does not list them so (not a BPE/WordPiece-style vocabulary)."""
    vocab = tokenizer.get("model", {}).get("vocab") if isinstance(tokenizer, dict) else None
    if not isinstance(vocab, dict):
        return None
    ids = {int(i): str(t) for t, i in vocab.items() if isinstance(i, int)}
    ids.update({a["id"]: a["content"] for a in tokenizer.get("added_tokens", []) if isinstance(a, dict)
                and isinstance(a.get("id"), int) and "content" in a})
    if not ids or min(ids) < 0 or max(ids) >= 10 * len(ids):  # sparse ids: not a list
        return None
    return [ids.get(i, "") for i in range(max(ids) + 1)]
