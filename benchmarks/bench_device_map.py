"""A target split over devices against the same target whole: greedy speculative output
equals the target's greedy output, alpha is the same, and what a 1-token step costs.

    python benchmarks/bench_device_map.py --device cuda --split half-cpu        # layers 0..L/2 run on the CPU
    python benchmarks/bench_device_map.py --device cuda --split offload          # layers 0..L/2 kept in CPU memory
    python benchmarks/bench_device_map.py --device cpu --split disk               # second half streamed from disk

`half-cpu` dispatches with accelerate's main device = cpu, so the first half of the layers
computes on the CPU and the rest on the GPU (with --untie, inputs on the CPU and logits on
the GPU: the two-device case; tied embeddings stay with the output layer); `offload` is from_pretrained's own map {first half: "cpu", rest: 0}
(weights moved to the GPU as each layer runs). --config-only builds the model from a folder's
config.json with random weights (pass times and equality do not depend on the values).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build(folder: Path, config_only: bool, device_map=None, offload: str | None = None, untie: bool = False):
    from transformers import AutoConfig, AutoModelForCausalLM

    if config_only:
        torch.manual_seed(0)
        config = AutoConfig.from_pretrained(folder)
        config.tie_word_embeddings = config.tie_word_embeddings and not untie
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, device_map=device_map,
                                                offload_folder=offload).eval()


def split_map(model, how: str, device: str) -> tuple[dict, str | None]:
    layers = model.config.num_hidden_layers
    gpu = 0 if device.startswith("cuda") else "cpu"
    first = "cpu"
    rest = {"cpu": "disk", "half-cpu": gpu, "offload": gpu, "disk": "disk"}[how]
    tied = model.get_input_embeddings().weight is model.get_output_embeddings().weight  # one tensor: one device
    out = {"model.embed_tokens": rest if tied else first, "model.rotary_emb": first, "model.norm": rest,
           "lm_head": rest}
    out.update({f"model.layers.{i}": first if i < layers // 2 else rest for i in range(layers)})
    return out, ("cpu" if how == "half-cpu" else None)


def step_ms(model, ids: list[int], repeats: int = 20) -> float:
    from specdec.reference.model.placement import output_device
    from specdec.reference.core.seams import Proposal, Verdict
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.estimate.timing import sync

    scorer = TargetScorer(model)
    scorer.start(ids)
    times = []
    for r in range(repeats + 3):
        sync(output_device(model))
        start = time.perf_counter()
        scorer.score(Proposal.empty())
        sync(output_device(model))
        times.append(time.perf_counter() - start)
        scorer.commit(Verdict(0, torch.tensor([ids[r % len(ids)]]), True))
    return 1000 * statistics.median(times[3:])


def main() -> None:
    import tempfile

    from specdec.reference.core.loop import autoregressive_decode, speculative_decode
    from specdec.reference.model.placement import input_device, output_device
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
    from specdec.reference.estimate.alpha import estimate_alpha
    from specdec.reference.estimate.samples import generate_continuations

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default=None, help="model folder (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--config-only", action="store_true", help="random weights from the folder's config.json")
    p.add_argument("--device", default="cuda")
    p.add_argument("--split", default="half-cpu", choices=["half-cpu", "offload", "disk"])
    p.add_argument("--untie", action="store_true", help="with --config-only: separate input and output embeddings "
                   "(then the input embeddings stay with the first half: inputs on the CPU, logits on the GPU)")
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--json-out", default=None)
    a = p.parse_args()
    if a.target is None:
        from specdec.reference.data.default_model import default_target_path
        a.target = default_target_path()
    folder = Path(a.target)
    whole = build(folder, a.config_only, untie=a.untie).to(a.device)
    device_map, main_device = split_map(whole, a.split, a.device)
    offload = tempfile.mkdtemp() if "disk" in device_map.values() else None
    if main_device is not None or a.config_only:  # dispatch ourselves (from_pretrained picks the GPU as main)
        from accelerate import dispatch_model
        split = build(folder, a.config_only, untie=a.untie)
        split = dispatch_model(split, device_map, main_device=main_device, offload_dir=offload)
        split.hf_device_map = dict(device_map)
    else:
        split = build(folder, False, device_map, offload)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, min(20000, whole.config.vocab_size), (32,), generator=g).tolist() for _ in range(8)]
    prompt = prompts[0] * 2  # a repeated prompt gives prompt lookup something to find
    greedy = SamplingConfig(0.0)
    out = {"device": a.device, "split": a.split, "device_map": {k: str(v) for k, v in device_map.items()},
           "split_input_device": str(input_device(split)), "split_output_device": str(output_device(split))}
    if a.device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name(0)
    plain = autoregressive_decode(TargetScorer(whole), prompt, a.new_tokens, greedy, None).tokens
    for name, model in (("whole", whole), ("split", split)):
        spec = speculative_decode(TargetScorer(model), PromptLookupDrafter(), prompt, a.new_tokens, 3, greedy, None)
        out[f"{name}_greedy_equals_target"] = spec.tokens == plain
        out[f"{name}_step_ms"] = step_ms(model, prompt)
        sampling = SamplingConfig(1.0)
        samples = generate_continuations(model, prompts, 16, sampling, 1, batch_size=4)
        out[f"{name}_alpha"] = estimate_alpha(model, PromptLookupDrafter(), samples, model.config.vocab_size,
                                              np.random.default_rng(0), (1.0,), n_boot=100).alpha
        out[f"{name}_continuations"] = samples.continuations
    out["same_continuations"] = out.pop("whole_continuations") == out.pop("split_continuations")
    print(json.dumps(out, indent=1))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
