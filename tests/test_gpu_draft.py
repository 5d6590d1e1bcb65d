"""benchmarks/gpu_draft.py's round trip, the part a lent GPU cannot be asked to debug: a trained draft
packed without its (frozen, tied) embedding into parts, given back over more than one device call within
the call's file limits, and rebuilt here with the target's embedding: every tensor equal, the folder
loading as the same model."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_draft  # noqa: E402


def tiny_draft(folder: Path, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    return model


def card(folder: Path, target: Path) -> None:
    from specdec.reference.heads.store import weights_fingerprint

    (folder / "card.json").write_text(json.dumps({"format": "specdec-draft/1", "draft": {"layers": 3},
                                                  "target": {"weights_sha256": weights_fingerprint(target)}}))


def test_pack_give_unpack_is_exact_over_two_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work, target = tmp_path / "work", tmp_path / "target"
    (work / "packed").mkdir(parents=True)
    draft = tiny_draft(tmp_path / "d3", seed=1)
    target.mkdir()  # the target's embedding is the draft's (tied, frozen): unpack takes it from there
    save_file({gpu_draft.EMBEDDING: draft.model.embed_tokens.weight.detach().contiguous()},
              target / "model.safetensors")
    (target / "tokenizer_config.json").write_text("{}")
    card(tmp_path / "d3", target)

    monkeypatch.setattr(gpu_draft, "PART_BYTES", 40 << 10)  # several parts, as 13.5 MiB layers make on the GPU
    names = gpu_draft.pack(tmp_path / "d3", "d3", work / "packed")
    parts = [n for n in names if n.endswith(".safetensors")]
    assert len(parts) >= 3 and all((work / "packed" / n).stat().st_size <= 40 << 10 for n in parts)
    assert all(gpu_draft.EMBEDDING not in load_file(work / "packed" / n) for n in parts)

    monkeypatch.setattr(gpu_draft, "GIVE_FILES", 3)  # one call cannot give everything back
    first, second = tmp_path / "call1", tmp_path / "call2"
    gpu_draft.give(work, first)
    gpu_draft.unpack([first], tmp_path / "early", target)  # parts missing: nothing half-built
    assert not (tmp_path / "early" / "d3").exists()
    gpu_draft.give(work, second)
    given = sorted(p.name for p in [*first.iterdir(), *second.iterdir()])
    assert "d3-meta.json" in {p.name for p in first.iterdir()}  # the metadata comes back first
    assert len(given) == len(set(given)) and set(names) <= set(given)

    gpu_draft.unpack([first, second], tmp_path / "here", target)
    rebuilt = load_file(tmp_path / "here" / "d3" / "model.safetensors")
    original = load_file(tmp_path / "d3" / "model.safetensors")
    assert sorted(rebuilt) == sorted(original)
    assert all(torch.equal(rebuilt[k], original[k]) for k in original)
    loaded = LlamaForCausalLM.from_pretrained(tmp_path / "here" / "d3").eval()
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, draft(ids).logits)
    assert json.loads((tmp_path / "here" / "d3" / "card.json").read_text())["draft"]["layers"] == 3
    assert (tmp_path / "here" / "d3" / "tokenizer_config.json").is_file()

    other = tmp_path / "other-target"  # a draft trained against other target weights is refused, not rebuilt
    other.mkdir()
    save_file({gpu_draft.EMBEDDING: torch.zeros_like(draft.model.embed_tokens.weight)}, other / "model.safetensors")
    with pytest.raises(SystemExit, match="trained against target weights"):
        gpu_draft.unpack([first, second], tmp_path / "elsewhere", other)
    assert not (tmp_path / "elsewhere" / "d3").exists()
