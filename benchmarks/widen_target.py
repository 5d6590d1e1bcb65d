"""A 1B-class target that computes the default target's function: SmolLM2-135M-Instruct embedded
in a wider Llama (hidden 2048, 32 heads, 4 key-value heads, MLP 5632 by default: 1.42B parameters).

No model hub is reachable here and the registries carry no second size of any family, so a
1B-class target for timing checks (issue 48: "the cost model check ... of a 1B-class target run")
is built: the original weights sit in the first rows and columns of the wider matrices, every
other entry is zero. The extra residual dimensions stay exactly zero (every write into them is
a zero row), the extra heads and MLP units contribute nothing (their output columns are zero),
and the norms are rescaled (weight * sqrt(576 / hidden), eps * 576 / hidden) so the first 576
dimensions are the original's. The dense products still multiply the zeros: the passes cost
what a 1.42B-parameter Llama costs (5.7 GB of float32 weights streamed per step), while the
text, and so every drafter's acceptance, is the default target's.

The original's heads keep their key-value groups: group j of 3 query heads goes to new heads
j * (heads / kv_heads) + 0..2, its key-value head to new key-value head j.

    .venv/bin/python benchmarks/widen_target.py --out .cache/models/smollm2-wide-1.4b
    .venv/bin/specdec validate --target .cache/models/smollm2-wide-1.4b ...

The script checks its output: the widened model's logits against the original's on a real
prompt (max |difference|) and the two greedy continuations (must be equal).
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]


def widen(state: dict[str, torch.Tensor], config: dict, hidden: int, intermediate: int, heads: int,
          kv_heads: int) -> tuple[dict[str, torch.Tensor], dict]:
    """The widened state dict and config (see the module doc)."""
    h0, i0 = config["hidden_size"], config["intermediate_size"]
    n0, kv0, d = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    group0, group = n0 // kv0, heads // kv_heads
    if hidden < h0 or intermediate < i0 or kv_heads < kv0 or heads % kv_heads or group < group0:
        raise SystemExit(f"widen_target: cannot embed hidden {h0}, MLP {i0}, {n0} heads / {kv0} kv heads "
                         f"into {hidden}, {intermediate}, {heads} / {kv_heads}")
    q_rows = [(j * group + g) for j in range(kv0) for g in range(group0)]  # new head of original head j*group0+g
    scale = math.sqrt(h0 / hidden)

    def pad(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        out = torch.zeros(shape, dtype=t.dtype)
        out[tuple(slice(0, s) for s in t.shape)] = t
        return out

    def heads_rows(t: torch.Tensor, new_heads: int, placement: list[int]) -> torch.Tensor:
        """[n * d, h0] -> [new_heads * d, hidden], head i's rows at head placement[i]."""
        out = torch.zeros(new_heads * d, hidden, dtype=t.dtype)
        for i, p in enumerate(placement):
            out[p * d:(p + 1) * d, :h0] = t[i * d:(i + 1) * d]
        return out

    new: dict[str, torch.Tensor] = {}
    for name, t in state.items():
        if name.endswith("embed_tokens.weight"):
            new[name] = pad(t, (t.shape[0], hidden))
        elif name.endswith("norm.weight"):  # input, post-attention and final RMSNorms
            new[name] = pad(t * scale, (hidden,))
        elif name.endswith("q_proj.weight"):
            new[name] = heads_rows(t, heads, q_rows)
        elif name.endswith(("k_proj.weight", "v_proj.weight")):
            new[name] = heads_rows(t, kv_heads, list(range(kv0)))
        elif name.endswith("o_proj.weight"):
            out = torch.zeros(hidden, heads * d, dtype=t.dtype)
            for i, p in enumerate(q_rows):
                out[:h0, p * d:(p + 1) * d] = t[:, i * d:(i + 1) * d]
            new[name] = out
        elif name.endswith(("gate_proj.weight", "up_proj.weight")):
            new[name] = pad(t, (intermediate, hidden))
        elif name.endswith("down_proj.weight"):
            new[name] = pad(t, (hidden, intermediate))
        elif name == "lm_head.weight":
            new[name] = pad(t, (t.shape[0], hidden))
        else:
            raise SystemExit(f"widen_target: unexpected tensor {name}")
    wide = dict(config, hidden_size=hidden, intermediate_size=intermediate, num_attention_heads=heads,
                num_key_value_heads=kv_heads, rms_norm_eps=config["rms_norm_eps"] * h0 / hidden,
                _model_name_or_path=f"{config.get('_model_name_or_path', 'target')} widened to {hidden}")
    return new, wide


def check(source: Path, out: Path) -> tuple[float, bool, int]:
    """Max |logit difference| on a real prompt, whether the greedy continuations are equal, and
    the widened model's parameter count."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source)
    ids = tok("The quick brown fox jumps over the lazy dog. Once upon a time,", return_tensors="pt").input_ids
    results = []
    for folder in (source, out):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        with torch.inference_mode():
            logits = model(ids).logits[0].float()
            text = model.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:].tolist()
        results.append((logits, text, sum(p.numel() for p in model.parameters())))
        del model
    (a, ta, _), (b, tb, n) = results
    return float((a - b).abs().max()), ta == tb, n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, default=ROOT / ".cache/models/smollm2-135m-instruct")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    a = p.parse_args()
    if not (a.source / "model.safetensors").is_file():
        print(f"widen_target: --source {a.source} holds no model.safetensors (run scripts/setup.sh)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    config = json.loads((a.source / "config.json").read_text())
    state, wide = widen(load_file(a.source / "model.safetensors"), config, a.hidden, a.intermediate, a.heads,
                        a.kv_heads)
    a.out.mkdir(parents=True, exist_ok=True)
    for f in a.source.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            shutil.copy2(f, a.out / f.name)
    (a.out / "config.json").write_text(json.dumps(wide, indent=2))
    save_file(state, a.out / "model.safetensors", metadata={"format": "pt"})
    del state
    diff, same, params = check(a.source, a.out)
    print(f"{a.out}: {params / 1e9:.2f}B parameters, built in {time.perf_counter() - start:.0f} s; max |logit "
          f"difference| against {a.source.name}: {diff:.2e}; greedy continuations (24 tokens) equal: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
