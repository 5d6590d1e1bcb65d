"""`--device-map`: maps are parsed and checked (before any weights load) in one line each, and a
model split by accelerate over two "devices" — its second layer and output layer offloaded to
disk, loaded into memory layer by layer as they run — still decodes exactly: speculative
greedy output equals the target's own greedy output, and alpha equals the unsplit model's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.model.models import load_model
from specdec.reference.model.placement import (check_device_map, dispatched, input_device, output_device, owner,
                                              parse_device_map)
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.estimate.alpha import estimate_alpha
from specdec.reference.estimate.samples import generate_continuations
from tests.cli_helpers import run_main, strict_json
from tests.fakes import TINY_VOCAB, random_prompts

SPLIT = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
         "model.norm": "cpu", "lm_head": "disk"}


def test_parse_device_map(tmp_path) -> None:
    assert parse_device_map("auto") == "auto" and parse_device_map(" balanced ") == "balanced"
    assert parse_device_map('{"model": "cuda:1", "lm_head": 0, "x": "disk"}') == {"model": 1, "lm_head": 0, "x": "disk"}
    path = tmp_path / "map.json"
    path.write_text('{"": "cpu"}')
    assert parse_device_map(str(path)) == {"": "cpu"}
    for bad, match in (("automatic", "expected one of"), ("[1, 2]", "non-empty object"), ("{}", "non-empty object"),
                       ('{"a": -1}', "not a GPU index"), ('{"a": true}', "not a GPU index"),
                       ('{"a": "meta"}', "not a GPU index"), ('{"a": 1', "not valid JSON")):
        with pytest.raises(ValueError, match=match):
            parse_device_map(bad)


def test_owner_is_the_longest_covering_entry() -> None:
    device_map = {"model": 0, "model.layers.1": 1, "model.layers.10": "disk"}
    assert owner(device_map, "model.layers.1.mlp.weight") == "model.layers.1"
    assert owner(device_map, "model.layers.10.mlp.weight") == "model.layers.10"
    assert owner(device_map, "model.layers.11.mlp.weight") == "model"
    assert owner(device_map, "lm_head.weight") is None and owner({"": "cpu"}, "lm_head.weight") == ""


def test_check_device_map_names_the_problem(tiny_pair) -> None:
    check_device_map(SPLIT, tiny_pair.target)
    with pytest.raises(ValueError, match="no module 'model.layer.0'"):
        check_device_map({**SPLIT, "model.layer.0": "cpu"}, tiny_pair.target)
    with pytest.raises(ValueError, match="no entry covers the weight 'lm_head.weight'"):
        check_device_map({k: v for k, v in SPLIT.items() if k != "lm_head"}, tiny_pair.target)
    with pytest.raises(ValueError, match="GPU 7 is named"):
        check_device_map({"": 7}, tiny_pair.target)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_split_model_decodes_and_scores_exactly(tiny_pair, temperature: float) -> None:
    whole = load_model(tiny_pair.target)
    split = load_model(tiny_pair.target, device_map=SPLIT)
    assert dispatched(split.model) and not dispatched(whole.model)
    assert split.model.lm_head.weight.device.type == "meta"  # really offloaded: loaded from disk when it runs
    assert input_device(split.model) == output_device(split.model) == torch.device("cpu")
    draft = load_model(tiny_pair.draft, device_map="auto")
    sampling = SamplingConfig(temperature)
    prompt = random_prompts(1, 8, seed=5)[0]
    plain = autoregressive_decode(TargetScorer(whole.model), prompt, 24, sampling, torch.Generator().manual_seed(1))
    for gamma in (1, 3):
        spec = [speculative_decode(TargetScorer(m.model), NeuralDrafter(draft.model, TINY_VOCAB), prompt, 24, gamma,
                                   sampling, torch.Generator().manual_seed(1)).tokens for m in (split, whole)]
        assert spec[0] == spec[1] and len(spec[0]) == len(plain.tokens)  # same draws, same verdicts, split or not
        if temperature == 0:
            assert spec[0] == plain.tokens  # greedy equivalence through the split model
    prompts = random_prompts(6, 8, seed=6)
    alphas = [estimate_alpha(m.model, NeuralDrafter(draft.model, TINY_VOCAB),
                             generate_continuations(m.model, prompts, 12, sampling, 3, batch_size=3), TINY_VOCAB,
                             np.random.default_rng(0), (1.0,), n_boot=50).alpha for m in (whole, split)]
    assert alphas[0] == pytest.approx(alphas[1], abs=1e-12)


def test_cli_decode_with_a_split_target_and_draft(tiny_pair, capsys) -> None:
    import json

    common = ["decode", "--target", str(tiny_pair.target), "--prompt", "w3 w9 w27 w4", "--drafter",
              f"model:{tiny_pair.draft}", "--gamma", "3", "--max-new-tokens", "20", "--ignore-eos", "--json"]
    code, out, _ = run_main(capsys, common + ["--baseline"])
    assert code == 0
    plain = strict_json(out)
    code, out, _ = run_main(capsys, common + ["--device-map", json.dumps(SPLIT), "--draft-device-map", "sequential"])
    assert code == 0
    assert plain["baseline"]["same_tokens"]  # speculative greedy == the target's greedy, unsplit
    assert strict_json(out)["tokens"] == plain["tokens"]  # ... and split


@pytest.mark.parametrize("args,message", [
    (["--device-map", '{"lm_head": "cpu"}'], "no entry covers the weight"),
    (["--device-map", "{\"\": 3}"], "GPU 3 is named but this machine has"),
    (["--device-map", "automatic"], "expected one of auto"),
    (["--device-map", "auto", "--target-backend", "fast"], "the fast backend runs on one CPU"),
    (["--device-map", "auto", "--device", "cpu"], "give --device or --device-map, not both"),
    (["--draft-device-map", "auto"], "applies to exactly one neural drafter"),
])
def test_cli_refuses_bad_maps_in_one_line(tiny_pair, capsys, args: list[str], message: str) -> None:
    if torch.cuda.device_count() > 3 and "GPU 3" in message:
        pytest.skip("this machine has a GPU 3")
    code, out, err = run_main(capsys, ["decode", "--target", str(tiny_pair.target), "--prompt", "w1", *args])
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "device" in err.split(":")[1]  # names the option


def test_heads_refuse_an_offloaded_output_layer(tiny_pair, tmp_path) -> None:
    from specdec.reference.drafters.factory import make_drafter

    split = load_model(tiny_pair.target, device_map=SPLIT)  # lm_head on disk: its weight is a meta tensor
    with pytest.raises(ValueError, match="offloads: keep lm_head on a GPU or the CPU"):
        make_drafter(f"heads:{tmp_path}", split)
