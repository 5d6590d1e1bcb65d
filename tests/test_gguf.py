"""GGUF files as models (`--target FILE.gguf`, `--drafter model:FILE.gguf`; reference/model/gguf.py).

A tiny random Llama is written as a GGUF here, as llama.cpp's converter writes one: its q/k rows in
llama.cpp's rotary order, the matrices as Q8_0 blocks, a byte-level BPE tokenizer in the metadata
(gguf.GGUFWriter; no network). Checked: the converted folder's logits equal those of the HF model
holding the file's (dequantized) weights, a --dtype load equals transformers' own GGUF load in that
dtype, a second use does not convert again, greedy speculative decoding from GGUF files equals
greedy decoding, and bad files are one-line usage errors before any model loads or converts.
"""
from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from transformers.convert_slow_tokenizer import bytes_to_unicode

import specdec.reference.model.gguf as gguf_module
from specdec.errors import SpecdecError
import specdec.reference.model.models as models_module
from specdec.reference.model.models import load_model
from tests.cli_helpers import run_main, strict_json

BYTES = [bytes_to_unicode()[b] for b in range(256)]  # token id = byte value
TOKENS = [*BYTES, "\u0120w", "<|endoftext|>"]  # + one merge ("Ġ w": " w") + the end-of-text control token
EOS = len(TOKENS) - 1
HEADS, KV_HEADS, HIDDEN, LAYERS = 4, 2, 32, 2
EPS = 2.0 ** -20  # exact in float32, the type GGUF stores it in
PROMPT = "w1 w2 w3 w4 w1 w2"


def tiny_llama(seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(TOKENS), hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=512,
                         rms_norm_eps=EPS, rope_theta=10000.0, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # peaked distributions, so greedy paths depend on the context
    return model


def llama_cpp_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py permute of q/k rows (transformers undoes it on load)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(model: LlamaForCausalLM) -> dict[str, tuple[str, int | None]]:
    """GGUF tensor name -> (HF parameter name, heads to permute its rows for or None)."""
    names = {"token_embd.weight": ("model.embed_tokens.weight", None), "output.weight": ("lm_head.weight", None),
             "output_norm.weight": ("model.norm.weight", None)}
    parts = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    for i in range(LAYERS):
        for part, hf in parts.items():
            heads = {"attn_q": HEADS, "attn_k": KV_HEADS}.get(part)
            names[f"blk.{i}.{part}.weight"] = (f"model.layers.{i}.{hf}.weight", heads)
    return names


def write_gguf(path, seed: int) -> LlamaForCausalLM:
    """Write a tiny random Llama as a GGUF file (matrices Q8_0, norms F32); returns the HF model
    holding exactly the values the file holds (its matrices rounded through Q8_0)."""
    model = tiny_llama(seed)
    params = dict(model.named_parameters())
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_context_length(512)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(64)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(EPS)
    writer.add_vocab_size(len(TOKENS))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_token_types([gguf.TokenType.NORMAL] * (len(TOKENS) - 1) + [gguf.TokenType.CONTROL])
    writer.add_token_merges(["\u0120 w"])
    writer.add_eos_token_id(EOS)
    with torch.no_grad():
        for name, (hf_name, heads) in gguf_tensors(model).items():
            w = params[hf_name].detach().numpy()
            if w.ndim == 1:
                writer.add_tensor(name, w)
                continue
            blocks = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
            params[hf_name].copy_(torch.from_numpy(gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q8_0)))
            if heads is not None:
                blocks = llama_cpp_rows(blocks, heads)  # rows are whole blocks: permuting commutes with Q8_0
            writer.add_tensor(name, blocks, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """target.gguf and draft.gguf (same tokenizer, other weights), their HF twins, and the cache
    every test of this module converts into (SPECDEC_CACHE)."""
    root = tmp_path_factory.mktemp("gguf")
    twins = {name: write_gguf(root / f"{name}.gguf", seed) for name, seed in (("target", 0), ("draft", 1))}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECDEC_CACHE", str(root / "cache"))
        yield root, twins


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_conversion_equals_the_written_weights(files, fresh_cache, capsys) -> None:
    root, twins = files
    folder = gguf_module.model_folder(root / "target.gguf")
    note = [line for line in capsys.readouterr().err.splitlines() if "alpha is measured against" in line]
    assert folder.parent == fresh_cache / "models" and folder.name.startswith("gguf-target-")
    assert len(note) == 1 and "dequantized to float32" in note[0]  # one line (beside transformers' bar)
    assert "quantization_config" not in (folder / "config.json").read_text()
    loaded = load_model(root / "target.gguf")
    ids = loaded.tokenizer(PROMPT, return_tensors="pt").input_ids
    assert ids[0, :4].tolist() == [ord("w"), ord("1"), TOKENS.index("\u0120w"), ord("2")]
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, twins["target"](ids).logits)


def test_a_folder_whose_weights_lack_parameters_is_refused_by_name(files, fresh_cache, tmp_path) -> None:
    """A model folder missing a tensor would load with that weight random: refused, naming it."""
    import shutil

    from safetensors.torch import load_file, save_file

    root, _ = files
    folder = tmp_path / "partial"
    shutil.copytree(gguf_module.model_folder(root / "target.gguf"), folder)
    weights = load_file(folder / "model.safetensors")
    del weights["model.layers.1.mlp.down_proj.weight"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(SpecdecError, match=r"lack 1 parameters .*model.layers.1.mlp.down_proj.weight.*random"):
        load_model(folder)


def test_a_dtype_load_is_transformers_gguf_load_in_that_dtype(files) -> None:
    root, _ = files
    ours = load_model(root / "draft.gguf", dtype="bfloat16").model.state_dict()
    theirs = AutoModelForCausalLM.from_pretrained(root, gguf_file="draft.gguf", dtype=torch.bfloat16).state_dict()
    assert ours.keys() == theirs.keys()
    assert all(ours[k].dtype == torch.bfloat16 and torch.equal(ours[k], theirs[k]) for k in ours)


def test_second_use_does_not_convert(files, fresh_cache, capsys, monkeypatch) -> None:
    root, _ = files
    first = gguf_module.model_folder(root / "target.gguf")
    built = (first / "model.safetensors").stat()
    capsys.readouterr()

    def refuse(*args):
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_module, "_unloadable", refuse)  # nor checked again: the folder stands for it
    monkeypatch.setattr(gguf_module, "building", refuse)
    assert gguf_module.model_folder(root / "target.gguf") == first
    assert (first / "model.safetensors").stat().st_mtime_ns == built.st_mtime_ns
    assert capsys.readouterr().err == ""
    assert [p.name for p in fresh_cache.joinpath("models").iterdir() if not p.name.startswith(".")] == [first.name]


@pytest.mark.parametrize("drafter", ["model:{root}/draft.gguf", "model:{root}/target.gguf", "lookup"])
def test_greedy_decode_from_gguf_equals_greedy(files, capsys, drafter: str) -> None:
    root, _ = files
    code, out, err = run_main(capsys, ["decode", "--prompt", PROMPT, "--target", str(root / "target.gguf"),
                                       "--drafter", drafter.format(root=root), "--temperature", "0", "--gamma", "3",
                                       "--new-tokens", "24", "--ignore-eos", "--baseline", "--json"])
    assert code == 0, err
    result = strict_json(out)
    assert result["baseline"]["same_tokens"] is True and len(result["tokens"]) == 24
    if drafter.endswith("target.gguf"):  # the target drafting for itself: every draft accepted
        assert result["stats"]["keep_rate"] == 1.0


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-gguf")
    (root / "zip.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    writer = gguf.GGUFWriter(str(root / "bert.gguf"), "bert")  # a llama.cpp architecture transformers lacks
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    (root / "notes.txt").write_text("a file, neither a folder nor a GGUF")
    for name, arch, tensors in (("header", "llama", ()), ("mamba", "mamba", ()),
                                ("partial", "llama", ("token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight",
                                                      "blk.0.attn_output.weight", "blk.0.ffn_down.weight"))):
        writer = gguf.GGUFWriter(str(root / f"{name}.gguf"), arch)  # the metadata of a 2-block model
        writer.add_block_count(2)
        for tensor in tensors:
            writer.add_tensor(tensor, np.zeros((4, 4), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    # a key whose length claims 2^40 bytes
    (root / "huge.gguf").write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40) + b"x" * 64)
    return {"missing": str(root / "missing.gguf"), "zip": str(root / "zip.gguf"), "bert": str(root / "bert.gguf"),
            "txt": str(root / "notes.txt"), **{k: str(root / f"{k}.gguf") for k in ("header", "mamba", "partial", "huge")}}


BAD = {"missing": "no such GGUF file", "zip": "is not a GGUF file (it starts with b'PK\\x03\\x04'",
       "bert": "architecture 'bert' is not one specdec decodes",
       "txt": "is a file: expected a model folder or a .gguf file",
       "header": "it holds no tensors (a header only): every weight would be random",
       "mamba": "architecture 'mamba' is not one specdec decodes",
       "partial": "it lacks 3 of the tensors a 2-block llama needs (blk.1.attn_q.weight",
       "huge": "a string claims 1099511627776 bytes"}
COMMANDS = {"decode": ["decode", "--prompt", PROMPT], "estimate": ["estimate"], "validate": ["validate"],
            "bild": ["bild", "--prompt", PROMPT], "heads train": ["heads", "train", "--out", "{out}"],
            "eagle train": ["eagle", "train", "--out", "{out}"], "ngram corpus": ["ngram", "corpus"]}


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("command, option", [*[(c, "--target") for c in COMMANDS],
                                             *[(c, "--drafter") for c in ("decode", "estimate", "validate", "bild")]])
def test_bad_gguf_is_a_usage_error_before_loading(files, bad_files, fresh_cache, capsys, monkeypatch, tmp_path,
                                                  command, option, kind) -> None:
    root, _ = files

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded or converted before the usage error")

    monkeypatch.setattr(models_module, "load_model", refuse)
    monkeypatch.setattr(gguf_module, "convert_gguf", refuse)
    bad = bad_files[kind]
    args = ["--target", bad] if option == "--target" else ["--target", str(root / "target.gguf"),
                                                           "--drafter", f"model:{bad}"]
    argv = [a.format(out=tmp_path / "out") for a in COMMANDS[command]] + args
    code, out, err = run_main(capsys, argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", err
    assert len(lines) == 1 and lines[0].startswith(f"Error: Invalid value for '{option}'") and BAD[kind] in lines[0]
    assert not (fresh_cache / "models").exists()  # nothing converted, not even the good target
