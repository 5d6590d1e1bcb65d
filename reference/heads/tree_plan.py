"""The timings the tree plan (`specdec.simulator.trees`) needs, measured on the target: verify
steps with N draft nodes (the target pass over 1 + N tokens with its tree mask, the greedy
walk, keeping the accepted path's KV entries) and the heads' top-k pass.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import torch

from specdec.reference.estimate.timing import CacheEvictor
from specdec.reference.heads.model import BlockHeads


@torch.inference_mode()
def heads_pass_seconds(heads: BlockHeads, k: int, repeats: int = 50, evict_bytes: int | None = None) -> float:
    """Median seconds of one drafting step's heads pass: H heads on one hidden state, top-k;
    evict_bytes: what a target pass streams before it (`CacheEvictor`)."""
    hidden = torch.zeros(1, heads.hidden_size, device=heads.weight.device)
    token = torch.zeros(1, dtype=torch.long, device=heads.weight.device)
    times = []
    evict = CacheEvictor(heads.weight.device, evict_bytes)
    for _ in range(repeats + 5):
        evict()  # as in decoding, right after a target pass
        start = time.perf_counter()
        logq = heads(hidden, token)[0].float().log_softmax(-1)
        logq.topk(min(k, logq.shape[-1]), dim=-1).indices.cpu()
        times.append(time.perf_counter() - start)
    return float(np.median(times[5:]))


@torch.inference_mode()
def verify_step_seconds(model: torch.nn.Module, context: Sequence[int], sizes: Sequence[int], depth: int,
                        repeats: int = 7) -> dict[int, float]:
    """Median seconds of one greedy verify step with N draft nodes, N in sizes (0: a baseline
    step): a chain for N <= depth, else a tree of N nodes in paths of `depth` sharing their
    first token; sizes interleaved within each repeat so the machine's drift hits all alike."""
    from specdec.reference.core.seams import Proposal, Verdict
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.core.tree import chain_parents

    def tree(n: int) -> tuple[list[int], list[int]]:
        """n nodes: a chain for n <= depth, else chains of depth - 1 under one first node (depth 1:
        n siblings)."""
        if n <= depth:
            return [int(context[0])] * n, chain_parents(n)
        if depth <= 1:
            return [int(context[0])] * n, [-1] * n
        parents = [-1] + [0 if (i - 1) % (depth - 1) == 0 else i - 1 for i in range(1, n)]
        return [int(context[0])] * n, parents

    runs: dict[int, list[float]] = {n: [] for n in sizes}
    scorer = TargetScorer(model)
    for r in range(repeats + 1):
        for n in sizes:
            tokens, parents = tree(n)
            scorer.start(list(context))
            scorer.score(Proposal.empty())  # encode the pending token: the step below starts from a steady state
            scorer.commit(Verdict(0, torch.tensor([int(context[-1])]), True))
            start = time.perf_counter()
            logits = scorer.score(Proposal(torch.tensor(tokens), None, parents if n > depth else None)).logits
            best = int(logits[0].argmax())  # accept nothing: the walk stops at the root
            scorer.commit(Verdict(0, torch.tensor([best]), False, [] if n > depth else None))
            if r:
                runs[n].append(time.perf_counter() - start)
    return {n: float(np.median(v)) for n, v in runs.items()}
