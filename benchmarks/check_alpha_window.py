"""The estimator's alpha on code and edit (the embedded workloads' first 12 prompts, 64 sampled
tokens each, T = 0 and 1, sampling seed --seed) for a draft model: over every one of the first 32
positions, beside the alpha its own chain replay visits (accepted / reached at gamma 1-3, what a
decode counts: it never drafts a bonus position), and the lag-1 correlation of beta. A gap between
the two columns would be the decode's skipping; a gap between seeds is the draw of the continuations.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/check_alpha_window.py --draft .cache/drafts/d3 [--seed 11]
"""
from __future__ import annotations

import argparse

import numpy as np

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.data.encoder_inputs import load_target_prompts
from specdec.reference.data.prompts import PromptSource
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.estimate.alpha import estimate_alpha
from specdec.reference.estimate.replay import replay
from specdec.reference.estimate.samples import generate_continuations
from specdec.reference.model.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", required=True, help="a draft model folder (model:DIR)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    target = load_model(None, backend="fast")
    drafter, _ = make_drafter(f"model:{args.draft}", target, "cpu", "float32", None)
    prompt_set = load_target_prompts(target, 12, PromptSource(workloads=("code", "edit")))
    for category in prompt_set.category_names():
        ids = [list(p) for p in prompt_set.of(category)[:12]]
        for temperature in (0.0, 1.0):
            sampling = SamplingConfig(temperature)
            samples = generate_continuations(target.model, ids, 64, sampling, None if sampling.greedy else args.seed)
            alpha = estimate_alpha(target.model, drafter, samples, target.vocab_size, np.random.default_rng(0),
                                   max_gamma=4, n_boot=200)
            beta = np.stack([s.beta[:32] for s in alpha.scores])
            lag1 = np.corrcoef(beta[:, :-1].ravel(), beta[:, 1:].ravel())[0, 1]
            visited = [replay([s.accept()[:, :32] for s in alpha.scores], [s.block[:32] for s in alpha.scores], g,
                              alpha.max_gamma)[0].alpha() for g in (1, 2, 3)]
            print(f"{category} T={temperature:g} seed {args.seed}: alpha over the first 32 positions {beta.mean():.3f}, "
                  f"lag-1 correlation of beta {lag1:+.2f}; the chain replay visits "
                  + ", ".join(f"gamma {g} {a:.3f}" for g, a in zip((1, 2, 3), visited)), flush=True)


if __name__ == "__main__":
    main()
