"""The estimator's sampling of the target's continuations: the decode step with no drafter (today's
`estimate.samples`) against the left-padded loop it replaced (`estimate/samples.py` at 9c7ef61, read
from git), paired runs in alternating order on the default target. Per setting (T = 0 and T = 1 on 16
held-out prompts of 64 tokens, T = 1 on the same prompts cut to 20-65 tokens: a ragged batch), 64 new
tokens each, one batch of 16: how many continuations are identical, where the others part, and the
seconds of each run with the paired ratio new / old.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_samples_step.py [--backend auto] [--pairs 3]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.data.prompts import held_out_prompts
from specdec.reference.estimate import samples as new
from specdec.reference.model.models import load_model

OLD = "9c7ef61"  # the last commit with the left-padded loop


def old_module() -> types.ModuleType:
    """The old `estimate/samples.py`, its padding helper (since deleted from `ModelPass`) inlined."""
    root = Path(__file__).resolve().parent.parent
    src = subprocess.run(["git", "-C", str(root), "show", f"{OLD}:reference/estimate/samples.py"], check=True,
                         capture_output=True, text=True).stdout
    src = src.replace("padded = run.padding(mask)",
                      'padded = {"attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp_min(0)}')
    module = types.ModuleType("old_samples")
    sys.modules["old_samples"] = module  # dataclasses look their module up
    exec(compile(src, "old_samples.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", choices=["eager", "fast", "auto"])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    old = old_module()
    model = load_model(None, backend=args.backend).model
    equal, _ = held_out_prompts(16, 64)
    ragged = [p[:20 + 3 * i] for i, p in enumerate(equal)]
    for label, temperature, prompts in (("equal", 0.0, equal), ("equal", 1.0, equal), ("ragged", 1.0, ragged)):
        sampling = SamplingConfig(temperature)
        seconds: dict[str, list[float]] = {"old": [], "new": []}
        outs: dict[str, list[list[int]]] = {}
        for r in range(args.pairs):
            order = (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))
            for name, module in order:
                start = time.perf_counter()
                outs[name] = module.generate_continuations(model, prompts, 64, sampling, 0, batch_size=16).continuations
                seconds[name].append(time.perf_counter() - start)
        same = sum(a == b for a, b in zip(outs["old"], outs["new"]))
        parted = [next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
                  for a, b in zip(outs["old"], outs["new"]) if a != b]
        ratios = [n / o for n, o in zip(seconds["new"], seconds["old"])]
        runs = {name: ", ".join(f"{s:.2f}" for s in seconds[name]) for name in seconds}
        print(f"{label} T={temperature:g}: identical {same}/16, the others part at {parted}; old {runs['old']} s; "
              f"new {runs['new']} s; new/old per pair " + ", ".join(f"{x:.3f}" for x in ratios), flush=True)


if __name__ == "__main__":
    main()
