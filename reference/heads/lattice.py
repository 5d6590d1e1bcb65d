"""The BPD paper's lattice study on the target's own greedy text (Kim et al. 2024, Sec. 6.3 and
7): block efficiency of the base heads, of the oracle path through the top-k lattice, of
n-gram rescoring (p = 1), of parallel BPD (the best of p paths verified together), of local
rescoring, and the repetition and win/tie/loss tables. Method: docs/heads.md.

Greedy (T = 0) only: there the decoder's output is the target's greedy text, so each block's
accepted length is the leading agreement of its path with that text, and the greedy replay
turns accepted lengths into tokens per target pass (block efficiency) exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import time

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.ngram.rescore import CachedScorer, Lattice, kbest_paths, local_rescore, oracle_accepted
from specdec.reference.core.tree import trie
from specdec.reference.measure.bootstrap import bootstrap_ratio_ci
from specdec.reference.estimate.replay import accept_from_match, replay
from specdec.reference.estimate.samples import TargetSamples
from specdec.reference.estimate.blocks import leading_matches
from specdec.reference.heads.diagnostics import runs
from specdec.reference.heads.model import BlockHeads, block_inputs

WEIGHTS = (0.1, 0.3, 1.0, 3.0)  # interpolation weights tried on the tuning prompts


@dataclass
class Method:
    """Accepted lengths of one drafting method at every block start, per prompt."""

    name: str
    matches: list[np.ndarray] = field(default_factory=list)
    drafts: list[list[list[int]]] = field(default_factory=list)  # the p = 1 path per block start
    nodes: dict[int, list[int]] = field(default_factory=dict)  # depth h -> tree nodes per block, paths cut to h
    seconds: float = 0.0  # time spent choosing the paths, all blocks
    realizable: bool = True  # False for the oracle (it needs the answer)
    options: dict[str, Any] = field(default_factory=dict)  # the drafter's: p, rescorer, w, rescore

    def efficiency(self, depth: int, rng: np.random.Generator) -> dict[str, Any]:
        """Block efficiency (tokens per target pass, greedy replay) of the drafts cut to `depth`
        tokens, and its bootstrap interval. Cutting is exact: a cut path's accepted length is
        min(match, depth), and so is the best of p cut paths'."""
        tokens, passes = [], []
        for m in self.matches:
            stats, _ = replay([accept_from_match(np.minimum(m, depth), depth)], [np.full(m.shape[0], depth, dtype=np.int64)],
                              depth, depth)
            tokens.append(stats.new_tokens)
            passes.append(stats.iterations)
        tokens_a, passes_a = np.array(tokens, dtype=np.float64), np.array(passes, dtype=np.float64)
        lo, hi = bootstrap_ratio_ci(tokens_a, passes_a, rng)
        nodes = self.nodes.get(depth)
        return {"method": self.name, "depth": depth, "block_efficiency": float(tokens_a.sum() / passes_a.sum()),
                "ci": [lo, hi], "mean_accepted": float(np.minimum(np.concatenate(self.matches), depth).mean()),
                "tree_tokens": float(np.mean(nodes)) if nodes else None,
                "choose_ms": 1000 * self.seconds / max(len(nodes or []), 1) if self.realizable else None,
                "options": self.options if self.realizable else None}


@torch.inference_mode()
def lattices(model: torch.nn.Module, heads: BlockHeads, prompt: Sequence[int], cont: Sequence[int], k: int
             ) -> list[Lattice]:
    """The top-k lattice of the block drafted at every continuation position t (h under x_(t-1))."""
    hidden, token = block_inputs(model, prompt, cont)
    logq = heads(hidden, token).float().log_softmax(-1)  # [n, H, V']
    top = logq.topk(min(k, logq.shape[-1]), dim=-1)
    ids = heads.vocab[top.indices].cpu().numpy()
    values = top.values.double().cpu().numpy()
    return [Lattice(ids[t], values[t]) for t in range(len(cont))]


def study(model: torch.nn.Module, heads: BlockHeads, samples: TargetSamples, ngrams: dict[str, Any], k: int = 16,
          ps: Sequence[int] = (1, 2, 4, 8, 16), oracle_ks: Sequence[int] = (2, 16), tune: int = 2,
          seed: int = 0, lms: dict[str, Any] | None = None) -> dict[str, Any]:
    """Block efficiency of every method on samples.prompts[tune:] (greedy continuations); the
    interpolation weight of each n-gram is tuned on the first `tune` prompts (p = 1). lms:
    neural local rescorers (`LMRescorer`), local rescoring only, their weights tuned likewise.
    `by_depth` holds every method at every depth h <= H, as a drafter limited to h tokens (gamma
    = h) drafts: left-to-right choices (base, local rescoring) cut to h, path searches rerun on
    the lattice's first h positions."""
    lms = lms or {}
    if not samples.sampling.greedy:
        raise SpecdecError("the lattice study replays greedy decoding: sample the target at temperature 0")
    if len(samples.prompts) <= tune:
        raise SpecdecError(f"need more than {tune} prompts (the first {tune} tune the weights)")
    width = heads.n_heads
    all_lattices = [lattices(model, heads, p, c, max(k, *oracle_ks)) for p, c in
                    zip(samples.prompts, samples.continuations)]
    weights = {name: tune_weight(ng, samples, all_lattices[:tune], k, width) for name, ng in ngrams.items()}
    weights |= {name: tune_weight(lm, samples, all_lattices[:tune], k, width, local=True) for name, lm in lms.items()}
    methods: dict[str, Method] = {}
    searched: dict[tuple[str, int], Method] = {}  # path searches rerun on the lattice's first h < H positions

    def add(name: str, match: list[int], drafts: list[list[int]] | None = None, paths: list | None = None,
            seconds: float = 0.0, depth: int = width, **options: Any) -> None:
        store = methods if depth == width else searched
        key = name if depth == width else (name, depth)
        m = store.setdefault(key, Method(name, realizable=not name.startswith("oracle"), options=options))
        m.matches.append(np.array(match, dtype=np.int64))
        m.seconds += seconds
        if drafts is not None:
            m.drafts.append(drafts)
        if paths is not None:  # per block: the verified paths -> the size of their tree, cut to each depth
            for h in range(1, depth + 1):
                m.nodes.setdefault(h, []).extend(len(trie([q[:h] for q in ps])[0]) for ps in paths)

    for i in range(tune, len(samples.prompts)):
        prompt, cont, lats = samples.prompts[i], samples.continuations[i], all_lattices[i]
        truths = [cont[t:t + width] for t in range(len(cont))]
        small = [Lattice(lat.ids[:, :k], lat.logq[:, :k]) for lat in lats]
        base = [[int(x) for x in lat.ids[:, 0]] for lat in lats]
        add("base", [leading_matches(b, tr) for b, tr in zip(base, truths)], base, [[b] for b in base], p=1)
        for ok in oracle_ks:
            add(f"oracle top-{ok}", [oracle_accepted(Lattice(lat.ids[:, :ok], lat.logq[:, :ok]), tr)
                                     for lat, tr in zip(lats, truths)])
        for h in range(width, 0, -1):  # a search over h positions is not the H-search cut to h: run each
            cut = [Lattice(lat.ids[:h], lat.logq[:h]) for lat in small]
            for p in ps:
                if p > 1:
                    start = time.perf_counter()
                    paths = [[path for _, path in kbest_paths(lat, None, (), 0.0, p)] for lat in cut]
                    add(f"parallel base p={p}", [max(leading_matches(path, tr) for path in b) for b, tr in
                                                 zip(paths, truths)],
                        paths=paths, seconds=time.perf_counter() - start, depth=h, p=p)
            for name, ng in ngrams.items():
                w = weights[name]
                states = [ng.state_for(list(prompt) + list(cont[:t])) for t in range(len(cont))]
                for p in ps:  # each p searched and timed on its own, from a cold n-gram cache, as a drafter would
                    start = time.perf_counter()
                    best = [[path for _, path in kbest_paths(lat, CachedScorer(ng), s, w, p)]
                            for lat, s in zip(cut, states)]
                    label = f"{name} rescored" if p == 1 else f"{name} parallel p={p}"
                    add(label, [max(leading_matches(path, tr) for path in b) for b, tr in zip(best, truths)],
                        [b[0] for b in best] if p == 1 and h == width else None, best, time.perf_counter() - start,
                        depth=h, p=p, rescorer=name, w=w)
        for name, rescorer in {**ngrams, **lms}.items():
            w = weights[name]
            start = time.perf_counter()
            local = [local_rescore(lat, CachedScorer(rescorer), rescorer.state_for(list(prompt) + list(cont[:t])), w)
                     for t, lat in enumerate(small)]
            add(f"{name} local", [leading_matches(path, tr) for path, tr in zip(local, truths)], local,
                [[path] for path in local], time.perf_counter() - start, rescorer=name, w=w, rescore="local")
    rng = np.random.default_rng(seed)
    table = [m.efficiency(width, rng) for m in methods.values()]
    by_depth = [searched.get((m.name, h), m).efficiency(h, rng) for m in methods.values() if m.realizable
                for h in range(1, width + 1)]
    curve = oracle_curve(all_lattices[tune:], samples.continuations[tune:], width, rng)
    base_eff = table[0]["block_efficiency"]
    for row in table:
        row["relative"] = row["block_efficiency"] / base_eff - 1.0
    return {"k": k, "ps": list(ps), "oracle_ks": list(oracle_ks), "heads": width, "weights": weights,
            "tuning_prompts": tune, "prompts": len(samples.prompts) - tune,
            "blocks": int(sum(m.shape[0] for m in methods["base"].matches)), "block_efficiency": table,
            "by_depth": by_depth, "oracle_curve": curve,
            "repetition": repetition_table(methods, samples, tune), "wins": wins_table(methods, samples, tune)}


def oracle_curve(lats: list[list[Lattice]], continuations: Sequence[Sequence[int]], width: int,
                 rng: np.random.Generator) -> list[dict[str, Any]]:
    """The oracle top-k block efficiency for k = 1 .. the lattices' width (the paper's Fig. 6)."""
    rows = []
    for j in range(1, lats[0][0].ids.shape[1] + 1):
        matches = [np.array([oracle_accepted(Lattice(lat.ids[:, :j], lat.logq[:, :j]), cont[t:t + width])
                             for t, lat in enumerate(prompt_lats)]) for prompt_lats, cont in zip(lats, continuations)]
        rows.append({"k": j, **Method(f"oracle top-{j}", matches, realizable=False).efficiency(width, rng)})
    return rows


def tune_weight(rescorer, samples: TargetSamples, lats: list[list[Lattice]], k: int, width: int,
                local: bool = False) -> float:
    """The weight in WEIGHTS with the most accepted tokens of the rescored path (p = 1, or the
    local rescoring's path) on the tuning prompts."""
    scores = dict.fromkeys(WEIGHTS, 0)
    for prompt, cont, lattices_i in zip(samples.prompts, samples.continuations, lats):
        scorer = CachedScorer(rescorer)  # shared by the weights: its log-probabilities do not depend on them
        for t, lat in enumerate(lattices_i):
            state = rescorer.state_for(list(prompt) + list(cont[:t]))
            small = Lattice(lat.ids[:, :k], lat.logq[:, :k])
            for w in WEIGHTS:
                path = (local_rescore(small, scorer, state, w) if local else
                        kbest_paths(small, scorer, state, w, 1)[0][1])
                scores[w] += leading_matches(path, cont[t:t + width])
    return max(WEIGHTS, key=lambda w: (scores[w], -w))


def _blocks(method: Method, samples: TargetSamples, tune: int) -> list[np.ndarray]:
    """[y, d_1..d_H] per block start, y the committed token before the block."""
    out = []
    for j, drafts in enumerate(method.drafts):
        i = tune + j
        seq = list(samples.prompts[i]) + list(samples.continuations[i])
        start = len(samples.prompts[i])
        out.append(np.array([[seq[start + t - 1]] + d for t, d in enumerate(drafts)], dtype=np.int64))
    return out


def repetition_table(methods: dict[str, Method], samples: TargetSamples, tune: int) -> list[dict[str, Any]]:
    """The paper's Table 3 (left half) for every method with one draft per block."""
    rows = []
    for m in methods.values():
        if m.drafts:
            repetition, max_run = runs(np.concatenate(_blocks(m, samples, tune)))
            rows.append({"method": m.name, "consecutive_repetition": repetition, "max_run": max_run})
    return rows


def wins_table(methods: dict[str, Method], samples: TargetSamples, tune: int) -> list[dict[str, Any]]:
    """The paper's Table 5: rescored vs base drafts, block by block; repair = a win where the base
    draft repeated a token and the rescored one does not, regress = a loss the other way round."""
    base = methods["base"]
    base_rep = [(b[:, 1:] == b[:, :-1]).any(1) for b in _blocks(base, samples, tune)]
    rows = []
    for m in methods.values():
        if m is base or not m.drafts:
            continue
        rep = [(b[:, 1:] == b[:, :-1]).any(1) for b in _blocks(m, samples, tune)]
        win = np.concatenate([a > b for a, b in zip(m.matches, base.matches)])
        loss = np.concatenate([a < b for a, b in zip(m.matches, base.matches)])
        br, mr = np.concatenate(base_rep), np.concatenate(rep)
        rows.append({"method": m.name, "wins": float(win.mean()), "ties": float(1 - win.mean() - loss.mean()),
                     "losses": float(loss.mean()),
                     "repair": float((win & br & ~mr).sum() / max(win.sum(), 1)),
                     "regress": float((loss & ~br & mr).sum() / max(loss.sum(), 1))})
    return rows
