"""t(B, k): one target pass over B sequences x k new tokens each, with B KV caches at the
same context length (what a serving engine's verification pass costs at batch size B).

Each batch size gets its own cache of B different windows of real text; the k's are
interleaved within each repeat so the machine's drift hits them alike; every pass's new
entries are cropped again. Times are medians after warm-up, the GPU queue drained before
each clock reading. The planner: `specdec.simulator.batch`.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
import torch

from specdec.reference.core.placement import input_device, output_device
from specdec.reference.estimate.timing import context_of, sync


@dataclass
class BatchTiming:
    """seconds[b][k - 1] = t(batch_sizes[b], k), k = 1..max_k; spread: relative IQR of each cell."""

    context_tokens: int
    batch_sizes: list[int]
    seconds: list[list[float]]
    spread: list[list[float]]
    repeats: int
    threads: int
    device: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.inference_mode()
def time_batched_passes(model: torch.nn.Module, tokens: Sequence[int], batch_sizes: Sequence[int],
                        context_tokens: int = 128, max_k: int = 8, repeats: int = 5, warmup: int = 2) -> BatchTiming:
    from transformers import DynamicCache

    if context_tokens < 1 or max_k < 1 or not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"need context_tokens >= 1, max_k >= 1 and batch sizes >= 1, got {context_tokens}, {max_k}, "
                         f"{list(batch_sizes)}")
    device, last = input_device(model), output_device(model)  # inputs go to the first; the clock waits for the last
    text = context_of(tokens, context_tokens + max_k + max(batch_sizes))
    seconds, spread = [], []
    for b in batch_sizes:
        ids = torch.tensor([text[i:i + context_tokens + max_k] for i in range(b)], dtype=torch.long, device=device)
        cache = DynamicCache(config=model.config)
        model(input_ids=ids[:, :context_tokens], past_key_values=cache, use_cache=True, logits_to_keep=1)
        runs: dict[int, list[float]] = {k: [] for k in range(1, max_k + 1)}
        for r in range(warmup + repeats):
            for k in range(1, max_k + 1):
                sync(last)
                start = time.perf_counter()
                model(input_ids=ids[:, context_tokens:context_tokens + k], past_key_values=cache, use_cache=True,
                      logits_to_keep=k)
                sync(last)
                if r >= warmup:
                    runs[k].append(time.perf_counter() - start)
                cache.crop(-k)  # transformers 5: negative = number of tokens to drop
        seconds.append([float(np.median(runs[k])) for k in range(1, max_k + 1)])
        spread.append([float((np.quantile(runs[k], 0.75) - np.quantile(runs[k], 0.25)) / np.median(runs[k]))
                       for k in range(1, max_k + 1)])
        del cache
    return BatchTiming(context_tokens, [int(b) for b in batch_sizes], seconds, spread, repeats,
                       torch.get_num_threads(), str(device))
