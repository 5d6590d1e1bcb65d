"""The captured path's decoder (`specdec.reference.model.static_decoder`): its logits are
transformers' eager forward's (Llama and Qwen2, every attention mode, after a prefill and over
several verify lengths), its masks say exactly which keys each folded query row sees, and its
timing runs on the CPU. The CUDA-only parts (FlashAttention, graph capture) are checked on the
GPU by benchmarks/gpu_check.py's probe and logits check (docs/roofline.md)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from specdec.reference.model.static_decoder import ATTENTION, DecoderShape, StaticDecoder, time_step

SHAPES = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "shapes"
QWEN = {"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 40, "intermediate_size": 56,
        "num_attention_heads": 5, "num_key_value_heads": 1, "vocab_size": 97, "tie_word_embeddings": False,
        "rope_theta": 1e6, "rms_norm_eps": 1e-6}


def hf_model(config: dict) -> torch.nn.Module:
    hf = AutoConfig.for_model(**config)
    hf._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf, dtype=torch.float32).eval()
    with torch.no_grad():  # norms and biases away from their initial 1 and 0, so a mix-up shows
        for name, p in model.named_parameters():
            if "norm" in name or "bias" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("config", [json.loads((SHAPES / "tiny.json").read_text()), QWEN], ids=["llama", "qwen2"])
@pytest.mark.parametrize("attention", ["masked", "split"])
def test_logits_equal_transformers_eager(config: dict, attention: str) -> None:
    """3 rows, a 9-token prefix prefilled, then verify passes of k = 1, 3, 2 at L = 9, 10, 13 (each
    rewriting the cache from its L on) against the eager forward over the same whole sequences."""
    model = hf_model(config)
    tokens = torch.randint(0, config["vocab_size"], (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = model(tokens).logits
        static = StaticDecoder.from_hf(model, 4, 20, attention=attention)
        assert static.attention == attention and static.shape.qkv_bias == (config["model_type"] == "qwen2")
        prefix = static.prefill(tokens[:, :9])
        torch.testing.assert_close(prefix, expected[:, :9], atol=1e-4, rtol=1e-4)
        for start, k in ((9, 1), (10, 3), (13, 2)):
            got = static.step(tokens[:, start:start + k], start)
            torch.testing.assert_close(got, expected[:, start:start + k], atol=1e-4, rtol=1e-4)


def test_rows_beyond_the_batch_are_untouched_and_rows_are_independent() -> None:
    """A pass over B = 2 of a 4-row cache writes rows 0-1 only, and row 0's logits do not depend on
    what row 1 holds."""
    shape = DecoderShape.of(json.loads((SHAPES / "tiny.json").read_text()))
    model = StaticDecoder.random(shape, 4, 16, torch.float32, "cpu", torch.Generator().manual_seed(0))
    tokens = torch.randint(0, shape.vocab, (2, 6), generator=torch.Generator().manual_seed(2))
    model.prefill(tokens[:, :4])
    before = model.keys[:, 2:].clone()
    both = model.step(tokens[:, 4:6], 4)
    assert torch.equal(model.keys[:, 2:], before) and model.keys[:, :2, :, :6].abs().sum() > 0
    model.prefill(tokens[:1, :4])
    torch.testing.assert_close(model.step(tokens[:1, 4:6], 4), both[:1])


def test_masks_show_each_folded_row_its_keys() -> None:
    """Folded rows: query head j of a KV head and new token i at row j k + i. "masked": key t
    visible iff t <= L + i; "split": new key t visible iff t <= i (0 / -inf); k = 1: no mask."""
    shape = DecoderShape(layers=1, hidden=8, heads=4, kv_heads=2, head_dim=2, intermediate=8, vocab=5, tied=True)
    model = StaticDecoder.random(shape, 1, 12, torch.float32, "cpu")
    k, start, group = 3, 5, 2
    masked, split = model._mask("masked", k, start), model._mask("split", k, start)
    assert masked.shape == (group * k, start + k) and split.shape == (group * k, k)
    for j in range(group):
        for i in range(k):
            row = j * k + i
            assert masked[row].tolist() == [t <= start + i for t in range(start + k)]
            assert (split[row] == 0).tolist() == [t <= i for t in range(k)]
            assert all(split[row, t] == float("-inf") for t in range(i + 1, k))
    assert model._mask("masked", 1, start) is None and model._mask("flash", k, start) is None


def test_rope_theta_is_read_from_both_config_spellings() -> None:
    config = json.loads((SHAPES / "llama-3.2-1b.json").read_text())
    assert DecoderShape.of(config).rope_theta == 500000.0
    nested = {key: value for key, value in config.items() if key != "rope_theta"}
    nested["rope_parameters"] = {"rope_type": "default", "rope_theta": 250000.0}  # transformers 5's to_dict()
    assert DecoderShape.of(nested).rope_theta == 250000.0


def test_refuses_what_it_cannot_build() -> None:
    mixtral = {"model_type": "mixtral", "num_hidden_layers": 1, "hidden_size": 8, "intermediate_size": 8,
               "num_attention_heads": 2, "vocab_size": 10, "num_local_experts": 4, "num_experts_per_tok": 2}
    with pytest.raises(ValueError, match="dense gated"):
        DecoderShape.of(mixtral)
    shape = DecoderShape.of(json.loads((SHAPES / "tiny.json").read_text()))
    with pytest.raises(ValueError, match="attention must be one of"):
        StaticDecoder.random(shape, 1, 8, torch.float32, "cpu", attention="paged")
    assert set(ATTENTION) == {"masked", "flash", "split"}


def test_time_step_on_the_cpu() -> None:
    shape = DecoderShape.of(json.loads((SHAPES / "tiny.json").read_text()))
    model = StaticDecoder.random(shape, 2, 40, torch.float32, "cpu")
    cell = time_step(model, 2, 3, 32, target_seconds=0.002)
    assert (cell.batch, cell.k, cell.context) == (2, 3, 32) and cell.seconds > 0 and not cell.captured


def test_estimate_times_a_cpu_model_through_the_scorer_and_a_cuda_one_captured() -> None:
    """`specdec estimate --batch-sizes` takes the captured path only for a CUDA model; the path's
    table has the scorer's shape (B rows of k = 1..K seconds) and says what it was."""
    from specdec.reference.estimate.batch_timing import capturable, time_captured_passes
    from tests.tiny_models import tiny_llama

    model = tiny_llama(vocab_size=16, seed=0)
    assert not capturable(model)
    timing = time_captured_passes(model, [1, 3], context_tokens=8, max_k=4, trials=1)
    assert timing.batch_sizes == [1, 3] and [len(r) for r in timing.seconds] == [4, 4]
    assert timing.layout == "static" and all(s > 0 for row in timing.seconds for s in row)
    with pytest.raises(ValueError, match="batch sizes"):
        time_captured_passes(model, [0], context_tokens=8)
