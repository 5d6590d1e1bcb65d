"""The roofline cost model (`specdec.simulator.roofline`) and `specdec costs`: every term against a
hand computation on a tiny config, the shapes of real configs, monotonicity, tensor parallelism,
the touched-expert expectation against a Monte Carlo of uniform routing, memory fit, and a
70B-class plan on 8 H100s from config alone through `specdec plan`. No model weights."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from specdec.costfiles import read_batch_times, read_context_times, read_verify_cost
from specdec.errors import SpecdecError
from specdec.simulator.hardware import DTYPES, PRESETS, Device
from specdec.simulator.roofline import (KERNELS_OUTSIDE_LAYERS, expected_experts, memory_fit, model_shape,
                                        pass_seconds, pass_terms)
from tests.cli_helpers import run_main, strict_json

FIXTURES = Path(__file__).parent / "fixtures" / "engines"
BF16 = DTYPES["bf16"]
H100 = PRESETS["h100-sxm"]
LLAMA_70B = {"model_type": "llama", "num_hidden_layers": 80, "hidden_size": 8192, "intermediate_size": 28672,
             "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False}
SMOLLM2 = {"model_type": "llama", "num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536,
           "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152,
           "tie_word_embeddings": True}
MIXTRAL = {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
           "num_experts_per_tok": 2}
# 2 layers, hidden 8, 2 query heads and 1 KV head of width 4, MLP 16 (gated), vocabulary 10, untied.
TINY = {"num_hidden_layers": 2, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 10}
# Round numbers: 1000 bytes/s, 10^4 FLOP/s, 0.5 s per kernel, 3 kernels per layer, a 100 bytes/s link.
UNIT = Device("unit", 1000.0, {"bf16": 1e4}, 1e6, 0.5, 3, 100.0, 0.25)


def test_shapes_and_parameter_counts_of_real_configs() -> None:
    """Parameter counts by hand: SmolLM2-135M 30 x (576 x 15 x 64 + 576^2 + 3 x 576 x 1536) + 49152 x 576;
    GPT-2 small 12 x (4 x 768^2 + 2 x 768 x 3072) + 50257 x 768 (no position embeddings, biases, norms);
    Mixtral 8x7B's 46.7 B; a 70B-class Llama's 70.55 B."""
    assert model_shape(SMOLLM2).resident_weights(1) == 30 * (576 * 15 * 64 + 576**2 + 3 * 576 * 1536) + 49152 * 576
    gpt2 = model_shape({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257})
    assert (gpt2.gated, gpt2.tied, gpt2.kv_heads, gpt2.intermediate) == (False, True, 12, 3072)
    assert gpt2.resident_weights(1) == 12 * (4 * 768**2 + 2 * 768 * 3072) + 50257 * 768
    assert model_shape(MIXTRAL).resident_weights(1) == pytest.approx(46.70e9, rel=1e-3)
    assert model_shape(LLAMA_70B).resident_weights(1) == pytest.approx(70.55e9, rel=1e-3)
    qwen_moe = model_shape({**MIXTRAL, "num_local_experts": None, "num_experts": 60, "num_experts_per_tok": 4,
                            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632})
    assert (qwen_moe.experts, qwen_moe.expert_intermediate, qwen_moe.shared_intermediate) == (60, 1408, 5632)
    deepseek = model_shape({**MIXTRAL, "num_local_experts": None, "n_routed_experts": 64, "n_shared_experts": 2,
                            "moe_intermediate_size": 1408, "first_k_dense_replace": 1, "num_experts_per_tok": 6})
    assert (deepseek.shared_intermediate, deepseek.dense_layers, deepseek.moe_layers) == (2816, 1, 31)
    assert model_shape({"text_config": SMOLLM2}) == model_shape(SMOLLM2)


@pytest.mark.parametrize("config,match", [
    ({**TINY, "hidden_size": None}, "hidden_size"), ({**TINY, "num_hidden_layers": 0}, "num_hidden_layers"),
    ({**TINY, "num_key_value_heads": 3}, "inconsistent"), ({**TINY, "kv_lora_rank": 512}, "latent attention"),
    ({**MIXTRAL, "num_experts_per_tok": None}, "num_experts_per_tok")])
def test_bad_configs_are_one_line_errors(config, match) -> None:
    with pytest.raises(SpecdecError, match=match):
        model_shape(config)


def test_each_term_by_hand() -> None:
    """B = 3, k = 2 (N = 6 tokens), L = 5, bf16 (2 bytes): per layer attention 8 x (2 + 2) x 4 + 2 x 4 x 8 = 192
    weights, MLP 3 x 8 x 16 = 384; 2 layers and the output layer 10 x 8: 1232 weights."""
    t = pass_terms(model_shape(TINY), BF16, 1, 3, 2, 5)
    assert t.weight_bytes == 2 * 1232 and t.dense_flops == 2 * 6 * 1232
    assert t.logits_bytes == 6 * 10 * 2
    assert t.kv_bytes == 2 * 3 * (5 + 2) * 2 * 1 * 4 * 2  # layers B (L + k) 2 g d bytes
    assert t.attention_flops == 2 * 4 * 6 * (5 + 2) * 2 * 4  # layers 4 N (L + k) a d
    assert t.expert_bytes == 0 and t.expert_flops == 0
    seconds = pass_seconds(model_shape(TINY), BF16, UNIT, 1, 3, 2, 5)
    roof = max((2464 + 120) / 1000, 14784 / 1e4) + max(672 / 1000, 2688 / 1e4)
    assert seconds == pytest.approx(roof + (2 * 3 + KERNELS_OUTSIDE_LAYERS) * 0.5)
    # tp = 2: 1 query head per device, the 1 KV head replicated: 8 x 3 x 4 + 4 x 8 = 128 attention weights,
    # MLP 192, output 40 per device; 2 all-reduces per layer of N h b = 96 bytes, the logits' all-gather 120 bytes.
    t2 = pass_terms(model_shape(TINY), BF16, 2, 3, 2, 5)
    assert t2.weight_bytes == 2 * (2 * (128 + 192) + 40) and t2.kv_bytes == t.kv_bytes
    comm = 2 * 2 * (2 * 0.5 * 96 / 100 + 0.25) + 0.5 * 120 / 100 + 0.25
    assert t2.communication_seconds(UNIT) == pytest.approx(comm)


def test_monotone_in_batch_k_and_context() -> None:
    b, k, ctx = np.array([1, 2, 4, 8, 16, 32, 64])[:, None, None], np.arange(1, 17)[None, :, None], \
        np.array([0, 128, 1024, 8192])[None, None, :]
    for config, device, tp in ((SMOLLM2, H100, 1), (LLAMA_70B, H100, 8), (MIXTRAL, PRESETS["l40s"], 4),
                               (SMOLLM2, PRESETS["l4"], 3)):
        t = pass_seconds(model_shape(config), BF16, device, tp, b, k, ctx)
        assert t.shape == (7, 16, 4) and np.all(np.isfinite(t))
        assert all(np.all(np.diff(t, axis=axis) > 0) for axis in range(3))


def test_tensor_parallelism_splits_the_weight_term() -> None:
    model = model_shape(LLAMA_70B)
    one = pass_terms(model, BF16, 1, 4, 2, 1024)
    for tp in (2, 8):  # 8 KV heads: split exactly up to tp = 8
        split = pass_terms(model, BF16, tp, 4, 2, 1024)
        assert split.weight_bytes == pytest.approx(one.weight_bytes / tp)
        assert split.kv_bytes == pytest.approx(one.kv_bytes / tp) and split.dense_flops == pytest.approx(
            one.dense_flops / tp)
    over = pass_terms(model, BF16, 16, 4, 2, 1024)  # 1 KV head per device, replicated: more than 1/16
    assert over.weight_bytes > one.weight_bytes / 16 and over.kv_bytes == pytest.approx(one.kv_bytes / 8)
    with pytest.raises(SpecdecError, match="must divide"):
        pass_terms(model, BF16, 3, 1, 1, 1)


@pytest.mark.parametrize("experts,per_token,tokens", [(8, 2, 1), (8, 2, 3), (8, 2, 16), (64, 6, 8), (128, 8, 40)])
def test_touched_experts_match_a_monte_carlo_of_uniform_routing(experts, per_token, tokens) -> None:
    """4000 batches, each token routed to `per_token` distinct experts uniformly at random: the mean
    number of distinct experts touched is within 4 standard errors of E (1 - (1 - r/E)^N)."""
    rng = np.random.default_rng(0)
    keys = rng.random((4000, tokens, experts))
    chosen = np.zeros_like(keys, dtype=bool)
    np.put_along_axis(chosen, np.argpartition(keys, per_token - 1, axis=-1)[..., :per_token], True, axis=-1)
    distinct = chosen.any(axis=1).sum(axis=1)
    se = distinct.std(ddof=1) / np.sqrt(distinct.size) + 1e-9
    assert abs(distinct.mean() - expected_experts(experts, per_token, tokens)) < 4 * se + 1e-12


def test_moe_reads_only_the_touched_experts() -> None:
    model = model_shape(MIXTRAL)
    one, many = pass_terms(model, BF16, 1, 1, 1, 0), pass_terms(model, BF16, 1, 64, 8, 0)
    expert = 3 * 4096 * 14336 * 2  # bytes of one expert
    assert one.expert_bytes == pytest.approx(32 * 2 * expert)  # 1 token: its 2 experts in each of 32 layers
    assert many.expert_bytes == pytest.approx(32 * 8 * expert, rel=1e-6)  # 512 tokens touch all 8
    assert many.expert_flops == 2 * 512 * 32 * 2 * expert / 2


def test_per_group_maximum_versus_whole_pass() -> None:
    """Memory-bound attention beside compute-bound matrices: the per-group sum of maxima exceeds the
    whole pass's maximum; with every group memory-bound the two agree."""
    model, device = model_shape(SMOLLM2), replace(H100, launch_s=0.0, overlap=True, kv_bandwidth=None, verify_layer_s=0.0)
    grouped = pass_seconds(model, BF16, device, 1, 256, 16, 512)  # matrices 1.1 ms of FLOPs, KV 0.9 ms of reads
    whole = pass_seconds(model, BF16, device, 1, 256, 16, 512, per_group=False)
    assert grouped > 1.5 * whole
    small = [pass_seconds(model, BF16, device, 1, 1, 1, 128, per_group=g) for g in (True, False)]
    assert small[0] == pytest.approx(small[1])


def test_memory_fit_refuses_a_70b_on_one_gpu() -> None:
    model = model_shape(LLAMA_70B)
    one = memory_fit(model, BF16, H100, 1, 1, 1024, 8)
    assert not one.fits and one.weights == pytest.approx(70.55e9 * 2, rel=1e-3)
    assert "GiB" in one.message(1) and "\n" not in one.message(1)
    assert memory_fit(model, BF16, H100, 8, 32, 4096, 8).fits
    assert memory_fit(model, DTYPES["int4"], H100, 1, 1, 1024, 8).fits


def write_config(tmp_path: Path, config: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def test_70b_on_8_h100s_from_config_alone_to_a_plan(capsys, tmp_path) -> None:
    target = write_config(tmp_path, LLAMA_70B)
    draft = write_config(tmp_path, {**LLAMA_70B, "num_hidden_layers": 16, "hidden_size": 2048,
                                    "intermediate_size": 8192, "num_attention_heads": 32}, "draft.json")
    cost = tmp_path / "costs.json"
    code, out, err = run_main(capsys, ["costs", "--config", str(target), "--draft-config", str(draft), "--hardware",
                                       "h100-sxm", "--tp", "8", "--batch-sizes", "1,2,4,8,16,32", "--max-k", "8",
                                       "--context", "1024", "--out", str(cost), "--json"])
    assert code == 0, err
    report = strict_json(out)
    assert report == strict_json(cost.read_text())
    assert report["source"] == "roofline" and report["roofline"]["hardware"] == "h100-sxm"
    [table] = read_batch_times(cost)
    assert table.batch_sizes == (1, 2, 4, 8, 16, 32) and len(table.seconds[0]) == 8 and table.context_tokens == 1024
    assert read_verify_cost(cost)[0] == 1.0 and all(0 < c < 1 for c in report["draft"]["c"][0])
    code, out, err = run_main(capsys, ["plan", "--from", str(FIXTURES / "vllm_metrics.txt"), "--c", "0.05",
                                       "--batch-cost-file", str(cost), "--json"])
    assert code == 0, err
    assert strict_json(out)["batch"]["batch_sizes"] == [1, 2, 4, 8, 16, 32]


def test_several_contexts_plan_between_them(capsys, tmp_path) -> None:
    cost = tmp_path / "costs.json"
    code, out, err = run_main(capsys, ["costs", "--config", str(write_config(tmp_path, MIXTRAL)), "--hardware",
                                       "h200", "--tp", "2", "--context", "512,4096", "--out", str(cost)])
    assert code == 0, err
    assert "context 512 tokens" in out and "context 4096 tokens" in out and "--context 512" in out
    assert [t.context_tokens for t in read_batch_times(cost)] == [512, 4096]
    assert read_context_times(cost).contexts == (512, 4096)
    code, out, err = run_main(capsys, ["plan", "--from", str(FIXTURES / "vllm_metrics.txt"), "--c", "0.05",
                                       "--batch-cost-file", str(cost), "--context", "2000", "--json"])
    assert code == 0, err


def test_measured_hardware_takes_this_machines_numbers(capsys, tmp_path, monkeypatch) -> None:
    import specdec.reference.estimate.limits as limits

    monkeypatch.setattr(limits, "triad_bandwidth", lambda: 20e9)
    monkeypatch.setattr(limits, "matmul_flops", lambda: 100e9)
    monkeypatch.setattr(limits, "op_seconds", lambda: 5e-6)
    code, out, err = run_main(capsys, ["costs", "--config", str(write_config(tmp_path, SMOLLM2)), "--hardware",
                                       "measured", "--dtype", "fp32", "--batch-sizes", "1", "--max-k", "1",
                                       "--context", "128", "--json"])
    assert code == 0, err
    report = strict_json(out)
    assert report["roofline"]["device"]["bandwidth_bytes_per_s"] == 20e9 and report["roofline"]["peak_flops"] == 100e9
    model, device = model_shape(SMOLLM2), report["roofline"]["device"]
    expected = pass_seconds(model, DTYPES["fp32"], Device("m", 20e9, {"fp32": 100e9}, 1e12, 5e-6,
                                                          device["kernels_per_layer"], None, 0.0), 1, 1, 1, 128)
    assert report["batch_timing"]["seconds"][0][0] == pytest.approx(float(expected))


@pytest.mark.parametrize("args,option", [
    (["--tp", "3"], "--tp"), (["--tp", "0"], "--tp"), (["--dtype", "int3"], "--dtype"),
    (["--hardware", "tpu"], "--hardware"), (["--batch-sizes", "4,2"], "--batch-sizes"),
    (["--context", "0"], "--context"), (["--max-k", "0"], "--max-k"), (["--tflops", "nan"], "--tflops"),
    (["--bandwidth-gbs", "-1"], "--bandwidth-gbs"), (["--out", "/nonexistent/dir/c.json"], "--out"),
    (["--tp", "1"], "--tp"), (["--tp", "8", "--batch-sizes", "1,4096", "--context", "32768"], "--batch-sizes"),
    (["--hardware", "measured", "--tp", "2"], "--tp")])
def test_bad_options_are_one_line_and_status_2(capsys, tmp_path, args, option) -> None:
    config = write_config(tmp_path, LLAMA_70B)
    argv = ["costs", "--config", str(config), "--hardware", "h100-sxm", *args]
    code, out, err = run_main(capsys, argv)
    assert code == 2 and option in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("content,match", [(None, "cannot read"), ("{broken", "cannot read"), ("[1, 2]", "JSON object"),
                                           (json.dumps({**TINY, "vocab_size": "many"}), "vocab_size")])
def test_bad_configs_name_the_option(capsys, tmp_path, content, match) -> None:
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    for option in ("--config", "--draft-config"):
        argv = ["costs", "--config", str(write_config(tmp_path, TINY, "ok.json")), "--hardware", "l4",
                option, str(path)]
        code, out, err = run_main(capsys, argv)
        assert code == 2 and option in err and match in err and len(err.strip().splitlines()) == 1, err


def test_no_overlap_adds_memory_and_compute_and_the_kv_cap_slows_the_cache_reads() -> None:
    """A device that does not overlap (the GPU presets) prices each group at bytes / bandwidth +
    FLOPs / peak; the cache reads at min(bandwidth, kv_bandwidth). Hand-computed on TINY's terms."""
    t = pass_terms(model_shape(TINY), BF16, 1, 3, 2, 5)
    device = replace(UNIT, overlap=False, kv_bandwidth=UNIT.bandwidth / 2, launch_s=0.0)
    peak = device.flops_for(BF16)
    groups = [(t.weight_bytes + t.logits_bytes, t.dense_flops), (t.expert_bytes, t.expert_flops),
              (t.kv_bytes * 2, t.attention_flops)]
    assert t.seconds(device, peak) == pytest.approx(sum(b / device.bandwidth + f / peak for b, f in groups))
    assert t.seconds(device, peak) > t.seconds(replace(device, overlap=True, kv_bandwidth=None), peak)
    # a cap above the bandwidth changes nothing
    assert t.seconds(replace(device, kv_bandwidth=10 * UNIT.bandwidth), peak) == pytest.approx(
        t.seconds(replace(device, kv_bandwidth=None), peak))


def test_the_verify_term_prices_k_above_one_only() -> None:
    """`Device.verify_layer_s` adds layers x that much to every pass verifying k > 1 tokens a row,
    nothing at k = 1 (a decode step), whatever B."""
    device = replace(UNIT, verify_layer_s=1e-3, launch_s=0.0)
    plain = replace(device, verify_layer_s=0.0)
    layers = model_shape(TINY).layers
    for b in (1, 4):
        t = pass_terms(model_shape(TINY), BF16, 1, b, [1, 2, 5], 7)
        extra = t.seconds(device, device.flops_for(BF16)) - t.seconds(plain, plain.flops_for(BF16))
        assert extra == pytest.approx([0.0, layers * 1e-3, layers * 1e-3])


def test_gpu_presets_are_the_datasheet_times_the_shares_reached() -> None:
    from specdec.simulator.hardware import GPU_BANDWIDTH_SHARE, GPU_FLOPS_SHARE

    h200 = PRESETS["h200"]
    assert h200.bandwidth == pytest.approx(4.8e12 * GPU_BANDWIDTH_SHARE)
    assert h200.flops_for(BF16) == pytest.approx(989e12 * GPU_FLOPS_SHARE)
    assert not h200.overlap and h200.kv_bandwidth == PRESETS["h100-sxm"].kv_bandwidth < h200.bandwidth
    assert h200.verify_layer_s > 0 and PRESETS["l4"].kv_bandwidth is None
