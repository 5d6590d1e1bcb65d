"""The feature draft's chains and EAGLE-2 trees measured on the target's own text, for the tree
plan (`specdec.simulator.trees.plan_trees`): per shape, the tokens per target pass, the mean
draft nodes N and the drafting time per iteration (the shape's proposal plus the commit's layer
call over the entries that pass accepts), timed as decoding runs them. At temperature 0 the
tokens per pass are exact from the greedy text alone (the greedy walk of the tree along the
target's continuation, `study`); at T > 0 one target pass per position and shape gives the
exact chance of every node (`study_sampled`).

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

from specdec.reference.model.forward import forward
from specdec.reference.model.placement import input_device
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.tree import accepted_along
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
    for prompt, cont in sequences:
        for s in shapes:
            per_pass[s].append([])
        seq, rows = begin(target, drafter, prompt, cont)
        for t in range(len(cont) - deepest):
            at = len(prompt) - 1 + t
            for s in shapes:
                start = time.perf_counter()
                tokens, parents, _ = propose(drafter, s, greedy)
                n = accepted_along(tokens, parents, cont[t:]) + 1
                saved = drafter.snapshot()
                drafter.extend(*rows.of(at, at + n))  # the commit of n tokens
                draft_s[s].append(time.perf_counter() - start)
                drafter.restore(saved)  # back to this position's cache
                per_pass[s][-1].append(n)
                nodes[s].append(len(tokens))
            drafter.extend(*rows.of(at, at + 1))  # the pending token's entry
    return [{"method": s.label, "depth": s.depth, "nodes": s.nodes, "topk": s.topk,
             "block_efficiency": walked(per_pass[s]), "tree_tokens": float(np.mean(nodes[s])),
             "draft_ms": 1000 * float(np.median(draft_s[s])), "choose_ms": 0.0,
             "positions": sum(len(p) for p in per_pass[s]), "per_pass": per_pass[s]} for s in shapes]


@torch.inference_mode()
def study_sampled(target: torch.nn.Module, drafter: EagleDrafter,
                  sequences: Sequence[tuple[Sequence[int], Sequence[int]]], shapes: Sequence[Shape],
                  sampling: SamplingConfig, seed: int = 0, walks: int = 256) -> list[dict[str, Any]]:
    """The rows of `study` at temperature > 0, from the target's sampled continuations: at each
    position, one target pass over the shape's draft gives p (adjusted) at every node, and the
    chance that the pass reaches a node is exact: for a tree (deterministic nodes, recursive
    rejection over siblings) the product of p(token | its path) along the path, for a chain (its
    tokens drawn from q) the product of min(1, p / q) (a draw of the chain: unbiased over the
    draft's randomness). per_pass holds the expected tokens each position's pass commits;
    block_efficiency walks each sequence `walks` times drawing every pass's count from its exact
    distribution (as `walked` does at T = 0; seeded); draft_ms adds the proposal and the commit of
    one drawn count."""
    from specdec.reference.model.kv_session import KVSession
    from specdec.reference.core.tree import depths

    if drafter.tree:
        raise ValueError("study a chain drafter (eagle:PATH): each shape sets its own tree")
    deepest = max(s.depth for s in shapes)
    if not all(len(p) for p, _ in sequences) or not any(len(c) > deepest for _, c in sequences):
        raise ValueError(f"every prompt needs a token and some continuation more than {deepest} tokens")
    rng = np.random.default_rng(seed)
    generator = torch.Generator(device=drafter.draft.vocab.device).manual_seed(seed)
    reach: dict[Shape, list[list[np.ndarray]]] = {s: [] for s in shapes}  # P(pass commits >= k + 1), k = 0..depth
    nodes: dict[Shape, list[int]] = {s: [] for s in shapes}
    draft_s: dict[Shape, list[float]] = {s: [] for s in shapes}
    session = KVSession(target)
    for prompt, cont in sequences:
        for s in shapes:
            reach[s].append([])
        seq, rows = begin(target, drafter, prompt, cont)
        session.start(seq[:len(prompt)])
        for t in range(len(cont) - deepest):
            at = len(prompt) - 1 + t  # the pending token
            for s in shapes:
                start = time.perf_counter()
                tokens, parents, q = propose(drafter, s, sampling, generator)
                spent = time.perf_counter() - start
                p = sampling.probs(session.extend_tree(tokens, parents).logits.float())  # [1 + N, V]
                session.keep_tree_path([], [])
                session.truncate(at)
                session.append([seq[at]])
                chance = reached(tokens, parents, p, q)
                level = np.array(depths(parents), dtype=int)
                survival = np.array([1.0] + [chance[level == d].sum() for d in range(1, s.depth + 1)])
                n = draw(survival, rng)
                saved = drafter.snapshot()
                start = time.perf_counter()
                drafter.extend(*rows.of(at, at + n))  # the commit of a drawn count
                draft_s[s].append(spent + time.perf_counter() - start)
                drafter.restore(saved)
                reach[s][-1].append(survival)
                nodes[s].append(len(tokens))
            drafter.extend(*rows.of(at, at + 1))
            session.append([seq[at + 1]])
    return [{"method": s.label, "depth": s.depth, "nodes": s.nodes, "topk": s.topk,
             "block_efficiency": walked_sampled(reach[s], rng, walks), "tree_tokens": float(np.mean(nodes[s])),
             "draft_ms": 1000 * float(np.median(draft_s[s])), "choose_ms": 0.0,
             "positions": sum(len(r) for r in reach[s]),
             "per_pass": [[float(v.sum()) for v in r] for r in reach[s]]} for s in shapes]


def reached(tokens: Sequence[int], parents: Sequence[int], p: torch.Tensor, q: torch.Tensor | None) -> np.ndarray:
    """[N] the chance the pass accepts each node: p [1 + N, V] the target's adjusted rows (row 0
    the pending token's, 1 + i node i's); q [N, V] a sampled chain's draft rows, None for
    deterministic nodes."""
    chance = np.zeros(len(tokens))
    for i, (token, parent) in enumerate(zip(tokens, parents)):
        above = 1.0 if parent < 0 else chance[parent]
        target = float(p[parent + 1, token])
        chance[i] = above * (target if q is None else min(1.0, target / max(float(q[i, token]), 1e-30)))
    return chance


def draw(survival: np.ndarray, rng: np.random.Generator) -> int:
    """A pass's committed count (1 + accepted depth) drawn from P(count >= k + 1) = survival[k]."""
    return int((survival > rng.random()).sum())  # survival falls with k and survival[0] = 1


def walked_sampled(reach: Sequence[Sequence[np.ndarray]], rng: np.random.Generator, walks: int) -> float:
    """Tokens per pass of decodes walking each sequence from its first position, every pass's count
    drawn from that position's distribution (survival arrays), pooled over `walks` walks."""
    tokens = passes = 0
    for _ in range(walks):
        for per_position in reach:
            t = 0
            while t < len(per_position):
                n = draw(per_position[t], rng)
                tokens, passes, t = tokens + n, passes + 1, t + n
    return tokens / passes


def begin(target: torch.nn.Module, drafter: EagleDrafter, prompt: Sequence[int], cont: Sequence[int]
          ) -> tuple[list[int], "Rows"]:
    """(the whole sequence, one target pass's rows over it), the drafter started on the sequence (an
    entry reads only the committed token after it) with the prompt's entries but the pending token's."""
    seq = [int(t) for t in prompt] + [int(t) for t in cont]
    _, hidden, layers = forward(target, torch.tensor([seq[:-1]], device=input_device(target)), 1, drafter.needs)
    rows = Rows(hidden[0], None if layers is None else layers[0])
    drafter.start(seq)
    if len(prompt) > 1:
        drafter.extend(*rows.of(0, len(prompt) - 1))
    return seq, rows


@dataclass(frozen=True)
class Rows:
    """One pass's final hidden states [T, d] and the fused layers' [T, n, d] (None: none fused)."""

    hidden: torch.Tensor
    layers: torch.Tensor | None

    def of(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.hidden[start:stop], None if self.layers is None else self.layers[start:stop]


def propose(drafter: EagleDrafter, shape: Shape, sampling: SamplingConfig,
            generator: torch.Generator | None = None) -> tuple[list[int], list[int], torch.Tensor | None]:
    """The shape's draft from the drafter's cache as (tokens, parents, q: the chain's draft
    distributions at T > 0, else None); nothing before the first entry."""
    if drafter.cached == 0:
        return [], [], None
    proposal = drafter.propose_shape(None if shape.nodes is None else (shape.topk, shape.nodes), shape.depth,
                                     sampling, generator)
    tokens = proposal.tokens.tolist()
    if shape.nodes is None:
        return tokens, list(range(-1, len(tokens) - 1)), proposal.q
    return tokens, proposal.parents, None


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
                shapes: Sequence[Shape], sampling: SamplingConfig = SamplingConfig(0.0), seed: int = 0
                ) -> tuple[Any, list[dict[str, Any]], dict[int, float]]:
    """(the tree plan of `shapes`, best first; the study's rows; the verify steps {N: seconds}) from
    the target's continuations of `prompts` under `sampling` (greedy: `study`; T > 0:
    `study_sampled`, continuations and drafts seeded by `seed`; new_tokens each, plus the deepest
    shape's depth so every position sees a whole draft), the verify steps timed at the first prompt's
    length + new_tokens / 2 (`heads.tree_plan.verify_step_seconds`: a pass with N draft nodes,
    sizes interleaved within each of STEP_REPEATS repeats)."""
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.heads.tree_plan import verify_step_seconds
    from specdec.simulator.trees import plan_trees

    deepest = max(s.depth for s in shapes)
    samples = generate_continuations(target.model, prompts, new_tokens + deepest, sampling,
                                     None if sampling.greedy else seed)
    sequences = list(zip(samples.prompts, samples.continuations))
    rows = study(target.model, drafter, sequences, shapes) if sampling.greedy else \
        study_sampled(target.model, drafter, sequences, shapes, sampling, seed)
    context = list(samples.prompts[0]) + list(samples.continuations[0][:new_tokens // 2])
    steps = verify_step_seconds(target.model, context, sorted({0} | {s.nodes or s.depth for s in shapes}), deepest,
                                repeats=STEP_REPEATS)
    return plan_trees(rows, steps, 0.0), rows, steps
