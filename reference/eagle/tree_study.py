"""The feature draft's chains and EAGLE-2 trees measured on the target's own greedy text, for the
tree plan (`specdec.simulator.trees.plan_trees`): per shape, the tokens per target pass (exact
at temperature 0: the greedy walk of the tree along the target's continuation), the mean draft
nodes N and the drafting time per iteration (the shape's proposal plus the commit's layer call
over the entries that pass accepts), timed as decoding runs them.

The draft sees what decoding gives it: at continuation position t its cache holds the entries of
every committed position but the pending one, from one target pass over the whole sequence
(features of a causal model do not depend on later tokens).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from specdec.reference.core.forward import forward
from specdec.reference.core.placement import input_device
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Needs
from specdec.reference.core.tree import child
from specdec.reference.drafters.eagle import EagleDrafter


STEP_REPEATS = 21  # medians of the verify steps (7 let one drifting stretch of the machine set a size's step)


@dataclass(frozen=True)
class Shape:
    """A chain of `depth` tokens (nodes None) or a tree of `nodes` nodes, top-`topk`, depth `depth`."""

    depth: int
    nodes: int | None = None
    topk: int = 1

    @property
    def label(self) -> str:
        return f"chain g={self.depth}" if self.nodes is None else f"tree N={self.nodes} K={self.topk} d={self.depth}"

    def spec(self, folder: str) -> str:
        """The drafter spec that decodes with this shape (gamma: `depth`)."""
        return f"eagle:{folder}" if self.nodes is None else f"eagle:{folder},tree={self.nodes},topk={self.topk}"


def accepted(tokens: Sequence[int], parents: Sequence[int], truth: Sequence[int]) -> int:
    """Nodes the greedy walk accepts when the target's greedy continuation is `truth`."""
    node, n = -1, 0
    for want in truth:
        node = child(tokens, parents, node, int(want))
        if node is None:
            return n
        n += 1
    return n


@torch.inference_mode()
def study(target: torch.nn.Module, drafter: EagleDrafter, sequences: Sequence[tuple[Sequence[int], Sequence[int]]],
          shapes: Sequence[Shape]) -> list[dict[str, Any]]:
    """One row per shape: per_pass (per sequence, the tokens a pass from each position studied
    commits, the target's own included), block_efficiency (tokens per pass of the greedy decode:
    each sequence walked from its first position by those counts; the mean over all positions
    would overweight easy stretches, which a decode crosses in few passes), tree_tokens (mean
    draft nodes), draft_ms (median over positions of the proposal plus the commit of what that
    pass accepts: the pending token's entry and the accepted nodes'), positions.

    drafter: a chain drafter (each shape sets its own tree). sequences: (prompt, the target's
    greedy continuation); the positions studied are the first len(continuation) - the deepest
    shape's depth, so every draft is compared whole."""
    if drafter.tree:
        raise ValueError("study a chain drafter (eagle:PATH): each shape sets its own tree")
    deepest = max(s.depth for s in shapes)
    if not all(len(p) for p, _ in sequences):
        raise ValueError("every prompt needs a token")
    if not any(len(c) > deepest for _, c in sequences):
        raise ValueError(f"no position to study: every continuation needs more than {deepest} tokens")
    per_pass = {s: [] for s in shapes}
    nodes = {s: [] for s in shapes}
    draft_s = {s: [] for s in shapes}
    greedy = SamplingConfig(0.0)
    try:
        for prompt, cont in sequences:
            for s in shapes:
                per_pass[s].append([])
            seq = [int(t) for t in prompt] + [int(t) for t in cont]
            _, hidden, _ = forward(target, torch.tensor([seq[:-1]], device=input_device(target)), 1,
                                   Needs(hidden=True))
            hidden = hidden[0]
            drafter.start(seq)  # its tokens: the whole sequence; an entry reads only the committed token after it
            if len(prompt) > 1:
                drafter.extend(hidden[:len(prompt) - 1])
            for t in range(len(cont) - deepest):
                for s in shapes:
                    start = time.perf_counter()
                    tokens, parents = propose(drafter, s, greedy)
                    n = accepted(tokens, parents, cont[t:]) + 1
                    saved = drafter.keys, drafter.values, drafter.last
                    drafter.extend(hidden[len(prompt) - 1 + t:len(prompt) - 1 + t + n])  # the commit of n tokens
                    draft_s[s].append(time.perf_counter() - start)
                    drafter.keys, drafter.values, drafter.last = saved  # back to this position's cache
                    per_pass[s][-1].append(n)
                    nodes[s].append(len(tokens))
                drafter.extend(hidden[len(prompt) - 1 + t:len(prompt) + t])  # the pending token's entry
    finally:
        drafter.shape_tree = None
    return [{"method": s.label, "depth": s.depth, "nodes": s.nodes, "topk": s.topk,
             "block_efficiency": walked(per_pass[s]), "tree_tokens": float(np.mean(nodes[s])),
             "draft_ms": 1000 * float(np.median(draft_s[s])), "choose_ms": 0.0,
             "positions": sum(len(p) for p in per_pass[s]), "per_pass": per_pass[s]} for s in shapes]


def propose(drafter: EagleDrafter, shape: Shape, greedy: SamplingConfig) -> tuple[list[int], list[int]]:
    """The shape's draft from the drafter's cache as (tokens, parents); nothing before the first entry."""
    if drafter.last is None:
        return [], []
    if shape.nodes is None:
        tokens = drafter.propose(shape.depth, greedy, None).tokens.tolist()
        return tokens, list(range(-1, len(tokens) - 1))
    drafter.shape_tree = (shape.topk, shape.nodes)
    proposal = drafter.propose_tree(shape.depth)
    return proposal.tokens.tolist(), proposal.parents


def walked(per_pass: Sequence[Sequence[int]]) -> float:
    """Tokens per pass of greedy decodes that start at each sequence's first position and move on
    by what each pass commits, while within the positions studied."""
    tokens = passes = 0
    for counts in per_pass:
        t = 0
        while t < len(counts):
            tokens, passes, t = tokens + counts[t], passes + 1, t + counts[t]
    return tokens / passes


def candidates(shape: Shape) -> int:
    """Nodes an EAGLE-2 tree of this shape can choose from: top-k at the root, then top-k of each
    of the k best frontier nodes at every further depth."""
    return shape.topk + (shape.depth - 1) * shape.topk ** 2


def plan_shapes(target, drafter: EagleDrafter, prompts: Sequence[Sequence[int]], new_tokens: int,
                shapes: Sequence[Shape]) -> tuple[Any, list[dict[str, Any]], dict[int, float]]:
    """(the tree plan of `shapes`, best first; the study's rows; the verify steps {N: seconds}) from
    the target's greedy continuations of `prompts` (new_tokens each, plus the deepest shape's
    depth so every position sees a whole draft), the verify steps timed at the first prompt's
    length + new_tokens / 2 (`heads.tree_plan.verify_step_seconds`: a pass with N draft nodes,
    sizes interleaved within each of STEP_REPEATS repeats)."""
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.heads.tree_plan import verify_step_seconds
    from specdec.simulator.trees import plan_trees

    deepest = max(s.depth for s in shapes)
    samples = generate_continuations(target.model, prompts, new_tokens + deepest, SamplingConfig(0.0), None)
    rows = study(target.model, drafter, list(zip(samples.prompts, samples.continuations)), shapes)
    context = list(samples.prompts[0]) + list(samples.continuations[0][:new_tokens // 2])
    steps = verify_step_seconds(target.model, context, sorted({0} | {s.nodes or s.depth for s in shapes}), deepest,
                                repeats=STEP_REPEATS)
    return plan_trees(rows, steps, 0.0), rows, steps
