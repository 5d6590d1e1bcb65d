"""Does the estimator's batched sampling (`samples.generate_batch`: the decode step over a ragged batch,
every prompt encoded in its first pass) give the tokens each prompt gets alone, on the default
target and the embedded workloads' first 12 prompts per category? Greedy and T = 1 (each prompt its own generator, seed 7), 32 tokens; prints, per
category and temperature, the first position where the batched continuation differs from the lone
one (None: identical). Float rounding may part a T = 1 sample late; a padding fault parts it early.
2026-11-28: the old left-padded loop vs this one are in RESULTS ("Estimator").

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/check_padded_samples.py [--backend fast]
"""
from __future__ import annotations

import argparse

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.data.encoder_inputs import load_target_prompts
from specdec.reference.data.prompts import PromptSource
from specdec.reference.estimate.samples import generate_batch
from specdec.reference.model.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="fast", choices=["eager", "fast", "auto"])
    args = parser.parse_args()
    target = load_model(None, backend=args.backend)
    prompt_set = load_target_prompts(target, 12, PromptSource(workloads=("code", "edit", "chat")))
    for category in prompt_set.category_names():
        ids = [list(p) for p in prompt_set.of(category)[:12]]
        for temperature in (0.0, 1.0):
            sampling = SamplingConfig(temperature)
            seed = None if sampling.greedy else 7
            batched = generate_batch(target.model, ids, 32, sampling, range(len(ids)), seed)
            alone = [generate_batch(target.model, [p], 32, sampling, [j], seed)[0] for j, p in enumerate(ids)]
            parted = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None) for x, y in zip(batched, alone)]
            print(f"{args.backend} {category} T={temperature:g}, prompts of {min(map(len, ids))}-{max(map(len, ids))} "
                  f"tokens: first differing position per prompt {parted}", flush=True)


if __name__ == "__main__":
    main()
