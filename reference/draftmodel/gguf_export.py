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
