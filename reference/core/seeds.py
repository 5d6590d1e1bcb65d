"""Seeds derived from the command's one `--seed`: every stream of random numbers (a prompt's
sampled continuation, a bootstrap, a decode run) gets its own seed from the global seed and
the stream's coordinates, so a result never depends on the order, batching or process in
which the streams are drawn (docs/distributed.md)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def derive_seed(*parts: int) -> int:
    """A 64-bit seed (fits torch's signed manual_seed) from integer coordinates, e.g.
    (global seed, temperature index, purpose, prompt index). Distinct tuples give
    statistically independent streams (numpy's SeedSequence hashing)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint64)[0] >> 1)


def prompt_generators(seed: int, indices: Sequence[int], device: torch.device | str = "cpu"
                      ) -> list[torch.Generator]:
    """One generator per prompt, seeded from (seed, prompt index): prompt i draws the same
    numbers whichever batch or process it is sampled in."""
    return [torch.Generator(device=device).manual_seed(derive_seed(seed, i)) for i in indices]
