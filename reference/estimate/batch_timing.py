"""t(B, k, L): one target pass over B sequences x k new tokens each, every sequence holding L
cached tokens, through the ragged decoder's own scorer (`specdec.reference.model.batch_scorer`:
its cache, mask and padded or packed layout), so the table prices exactly the passes the
ragged batch decoder runs.

Every slot holds the same L tokens of real text (one encoding, copied; the content does not
change a pass's cost); the k's are interleaved within each repeat so the machine's drift hits
them alike, and every pass's new entries are dropped again. Times are medians after warm-up,
the GPU queue drained before each clock reading. The planners: `specdec.simulator.batch`
(lockstep) and `specdec.simulator.ragged` (per-row acceptance).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Sequence

import numpy as np
import torch

from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Proposal
from specdec.reference.drafters import neural
from specdec.reference.estimate.timing import context_of, sync

GREEDY = SamplingConfig(0.0)


@dataclass
class BatchTiming:
    """seconds[b][k - 1] = t(batch_sizes[b], k) at context_tokens, k = 1..max_k; spread: relative
    IQR of each cell."""

    context_tokens: int
    batch_sizes: list[int]
    seconds: list[list[float]]
    spread: list[list[float]]
    repeats: int
    threads: int
    device: str
    layout: str = "padded"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.inference_mode()
def time_batched_passes(model: torch.nn.Module, tokens: Sequence[int], batch_sizes: Sequence[int],
                        context_tokens: int = 128, max_k: int = 8, repeats: int = 5, warmup: int = 2,
                        layout: str = "padded", draft_step: bool = False) -> BatchTiming:
    """The module doc's table; `draft_step`: each pass a draft model's greedy step instead of a
    verify, as `NeuralSlots` runs it (`BatchScorer.next_logits`: the output layer at each slot's last
    fed position only, then `neural.draw`: q, the pick, its append)."""
    from specdec.reference.model.batch_scorer import BatchScorer

    if context_tokens < 1 or max_k < 1 or not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"need context_tokens >= 1, max_k >= 1 and batch sizes >= 1, got {context_tokens}, {max_k}, "
                         f"{list(batch_sizes)}")
    text = context_of(tokens, context_tokens + max_k)
    prompt, drafts = text[:context_tokens + 1], text[context_tokens + 1:]
    seconds, spread, device = [], [], None
    for b in batch_sizes:
        scorer = BatchScorer(model, b, context_tokens + max_k + 1, layout)
        for slot in range(b):
            scorer.start(slot, prompt)  # L cached tokens, the last prompt token pending
        device = scorer.output_device
        runs: dict[int, list[float]] = {k: [] for k in range(1, max_k + 1)}
        for r in range(warmup + repeats):
            for k in range(1, max_k + 1):
                if draft_step:  # the pending token and k - 1 more, fed as a draft model catches up
                    for slot in range(b):
                        scorer.append(slot, drafts[:k - 1])
                    timed = partial(_draft_step, scorer, b)
                else:
                    timed = partial(scorer.score, [Proposal(torch.tensor(drafts[:k - 1], dtype=torch.long))] * b)
                sync(device)
                start = time.perf_counter()
                timed()
                sync(device)
                if r >= warmup:
                    runs[k].append(time.perf_counter() - start)
                for slot in range(b):
                    scorer.rewind(slot, context_tokens + 1)
        seconds.append([float(np.median(runs[k])) for k in range(1, max_k + 1)])
        spread.append([float((np.quantile(runs[k], 0.75) - np.quantile(runs[k], 0.25)) / np.median(runs[k]))
                       for k in range(1, max_k + 1)])
        del scorer
    return BatchTiming(context_tokens, [int(b) for b in batch_sizes], seconds, spread, repeats,
                       torch.get_num_threads(), str(device), layout)


def median_over_blocks(by_batch: dict[int, Sequence[BatchTiming]]) -> BatchTiming:
    """One table from timings of one batch size each, taken several times (before each block of a
    measurement, so the table spans its minutes): per (B, k) the median over the takes; spread:
    the median of the takes' own; repeats: per take."""
    takes = [t for timings in by_batch.values() for t in timings]
    if not takes or any(len(t.batch_sizes) != 1 for t in takes):
        raise ValueError("need timings of one batch size each")
    return BatchTiming(takes[0].context_tokens, [int(b) for b in by_batch],
                       [[float(x) for x in np.median([t.seconds[0] for t in timings], axis=0)]
                        for timings in by_batch.values()],
                       [[float(x) for x in np.median([t.spread[0] for t in timings], axis=0)]
                        for timings in by_batch.values()],
                       takes[0].repeats, takes[0].threads, takes[0].device, takes[0].layout)


def capturable(model: torch.nn.Module) -> bool:
    """A CUDA model the captured static decoder can rebuild (a dense Llama-family causal LM)."""
    from specdec.reference.model.static_decoder import DecoderShape

    if next(model.parameters()).device.type != "cuda" or not hasattr(model, "config"):
        return False
    try:
        DecoderShape.of(model.config.to_dict())
    except (ValueError, KeyError, TypeError):  # SpecdecError is a ValueError
        return False
    return True


@torch.inference_mode()
def time_captured_passes(model: torch.nn.Module, batch_sizes: Sequence[int], context_tokens: int = 128,
                         max_k: int = 8, trials: int = 3) -> BatchTiming:
    """t(B, k) of `model`'s weights in the static decoder (`specdec.reference.model.static_decoder`):
    on CUDA each (B, k) captured once as a graph and replayed, so the table prices the hardware and
    not Python's launches (what `specdec estimate --batch-sizes` times on CUDA, docs/roofline.md);
    elsewhere eager. The copy concatenates q, k, v and gate, up: about 3/4 of the weights again."""
    from specdec.reference.model.static_decoder import StaticDecoder, time_step

    if context_tokens < 1 or max_k < 1 or not batch_sizes or min(batch_sizes) < 1:
        raise ValueError(f"need context_tokens >= 1, max_k >= 1 and batch sizes >= 1, got {context_tokens}, {max_k}, "
                         f"{list(batch_sizes)}")
    cuda = next(model.parameters()).device.type == "cuda"
    static = StaticDecoder.from_hf(model, max(batch_sizes), context_tokens + max_k, fused=cuda)
    cells = [[time_step(static, b, k, context_tokens, trials) for k in range(1, max_k + 1)] for b in batch_sizes]
    return BatchTiming(context_tokens, [int(b) for b in batch_sizes], [[c.seconds for c in row] for row in cells],
                       [[c.spread for c in row] for row in cells], trials, torch.get_num_threads(),
                       str(static.device), "captured" if cuda else "static")


def _draft_step(scorer, rows: int) -> None:
    """Every row's greedy draft step: next_logits, then the pick appended (`neural.draw`)."""
    neural.draw(scorer, range(rows), scorer.next_logits(range(rows)), GREEDY, [None] * rows)
