"""Teacher-forced acceptance: p and q at every position of the target's own sequences.

Names follow Leviathan et al.: `p` target, `q` draft, beta = sum_x min(p, q), `l` lenience.
One scorer per drafter kind (neural: one batched pass; n-gram: `score_sequence`; heads:
`heads_scorer`; any protocol drafter: fed token by token), plus what the replay needs
(`blocks`); a drafter names its own (`teacher_forced_scorer`). What teacher
forcing can and cannot give: docs/estimator.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch

from specdec.errors import SpecdecError
from specdec.reference.model.placement import input_device
from specdec.reference.drafters.neural import fit_vocab
from specdec.reference.core.progress import progress as progress_bar
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import NO_PASS, Verdict
from specdec.reference.estimate.blocks import chain_blocks, chain_matches, leading_matches, offset_beta, path_accept
from specdec.reference.estimate.replay import accept_from_match
from specdec.reference.estimate.samples import TargetSamples


@dataclass
class PositionScores:
    """Teacher-forced acceptance data for the n continuation positions of one sequence.

    beta: float64 [n], sum_x min(p_t, q_t).
    beta_lenient: float64 [n_l, n], sum_x min(p_t / l, q_t) for each lenience l.
    lenient_argmax: float64 [n_l, n] or None; temperature 0 only: 1 when the draft's token x
        has p_raw(x) >= l * max p_raw under the unadjusted (temperature-1) target softmax
        (App. A.5's variant for argmax sampling; the decoder does NOT implement it).
    proposed: bool [n], whether the drafter proposed a token at t (always True for q-drafters).
    match: int64 [n] or None; deterministic drafts (every drafter at temperature 0, prompt
        lookup at any): leading tokens of the drafter's block from the true prefix that equal
        x_t, x_t+1, ... (<= block[t]). A token tree at T = 0: [W, n], row g - 1 the nodes the
        greedy walk accepts of the tree drafted at draft length g (a tree is not the truncation
        of a deeper one: its node budget spreads over its depths).
    block: int64 [n] or None; length of that block (<= max_gamma; shorter near the end of
        the sequence only for drafters whose proposals are shorter); a tree: [W, n], its depth.
    nodes: int64 [W, n] or None; a token tree's node count, per draft length (the draft tokens
        its iteration verifies; a chain verifies its block).
    path_accept: float64 [W, n] or None; T > 0, drafters whose deeper drafts along the sequence
        are known (chains and blockwise drafts): min(1, q(x)/p(x)) for draft i + 1 of the block
        at t at the sequence's token x = x_(t+i) (`path_accept`); 0 past the end.
    """

    beta: np.ndarray
    beta_lenient: np.ndarray
    lenient_argmax: np.ndarray | None
    proposed: np.ndarray
    match: np.ndarray | None = None
    block: np.ndarray | None = None
    proposes_tokens: bool = False  # a deterministic protocol drafter (q one-hot at its proposal)
    offset_beta: np.ndarray | None = None  # [H, n] heads: beta of draft position i from the block at t; NaN past the end
    path_accept: np.ndarray | None = None
    confidence: np.ndarray | None = None  # [n] top probability of the draft's unadjusted q (`estimate.confidence`)
    # (confidence [R], weight [R]) right after a rejected draft token (`estimate.past_rejection`)
    past_rejection: tuple[np.ndarray, np.ndarray] | None = None
    nodes: np.ndarray | None = None

    def accept(self) -> np.ndarray | None:
        """[W, n] the replay's acceptance along the sequence (`reference.estimate.replay`):
        path_accept at T > 0, else 0/1 from `match`; None where neither is known. A token tree:
        [W, W, n], the acceptance of the tree drafted at each draft length."""
        if self.path_accept is not None:
            return self.path_accept
        if self.match is None:
            return None
        width = max(1, int(self.block.max(initial=0)))
        if self.match.ndim == 2:
            return np.stack([accept_from_match(m, width) for m in self.match])
        return accept_from_match(self.match, width)


@dataclass
class DraftRows:
    """The draft side of one sequence's n continuation positions.

    q: float32 [n, vocab] adjusted draft distributions, or None for deterministic proposals.
    token: LongTensor [n], the proposed token at each position (-1 = no proposal); used when q
        is None. At temperature 0 a neural / n-gram q is one-hot, so it is given as its argmax.
    blocks: for deterministic protocol drafters, the proposed block at each position (list
        of n lists of ids); None otherwise.
    chain: True when each draft depends on the prefix alone (neural and n-gram drafters): the
        block from position t is the chain of per-position drafts, at temperature 0 their argmaxes.
    stop_token: a chain drafter stops its block after proposing this token (the n-gram
        drafter's EOS); None: blocks are always max_gamma long.
    offset_q, blockwise: blockwise heads; their per-position acceptance comes from offset_q at
        T > 0 and from `blocks` at T = 0.
    """

    q: torch.Tensor | None
    token: torch.Tensor | None
    blocks: list[list[int]] | None = None
    chain: bool = False
    stop_token: int | None = None
    offset_q: torch.Tensor | None = None  # [n, H, vocab] heads at T > 0: q of draft position i of the block at t
    blockwise: bool = False  # every draft position of a block is drafted independently (heads)
    confidence: torch.Tensor | None = None  # [n] top probability of the unadjusted draft distribution
    tree_match: np.ndarray | None = None  # [W, n] token trees: nodes the walk along the sequence accepts, per length
    tree_depth: np.ndarray | None = None  # [W, n] the depth of each of those trees
    tree_nodes: np.ndarray | None = None  # [W, n] the node count of each (the target verifies every node)
    tree_roots: list[list[int]] | None = None  # [n] the tokens of the deepest tree's first level


def tree_first_level(p: torch.Tensor, roots: Sequence[Sequence[int]], lenience: Sequence[float]
                     ) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """(beta [n], lenient beta [n_l, n], proposed [n]) of a deterministic tree's first level: the
    chance p_t(roots_t) that the token decoding emits at t is one of its roots (recursive rejection
    over one-hot siblings accepts a child exactly when the emitted token is one: `core.tree`), the
    formula sum_x min(p / l, q) with q the roots' indicator for each lenience l."""
    n = p.shape[0]
    index = torch.zeros(n, p.shape[1], dtype=torch.bool, device=p.device)
    for t, tokens in enumerate(roots):
        index[t, list(tokens)] = True
    p_roots = torch.where(index, p, torch.zeros_like(p)).double()
    beta = p_roots.sum(-1)
    lenient = torch.stack([p_roots.div(l).clamp(max=1.0).sum(-1) for l in lenience]) if lenience else \
        torch.zeros(0, n, dtype=torch.float64)
    return beta, lenient, np.array([bool(r) for r in roots])


def top_confidence(probs: torch.Tensor, top_k: int = 0) -> torch.Tensor:
    """[n] the draft's confidence at each row of probs [n, V]: its top probability, or with top_k
    > 0 that probability renormalised over the k most likely tokens (what llama.cpp's draft-simple
    compares with --spec-draft-p-min: its draft sampler keeps the top 10 and softmaxes them;
    `specdec.engines.llamacpp.validation.DRAFT_TOP_K`)."""
    if top_k <= 0:
        return probs.max(-1).values
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values
    return top[..., 0] / top.sum(-1).clamp_min(torch.finfo(top.dtype).tiny)


class DraftScorer(Protocol):
    """Teacher-forced draft rows for a batch of sequences."""

    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        """DraftRows for samples.prompts[i] + samples.continuations[i], i in indices."""


@torch.inference_mode()
def continuation_logits(model: torch.nn.Module, samples: TargetSamples, indices: Sequence[int]
                        ) -> list[torch.Tensor]:
    """Teacher-forced logits at the continuation positions, one batched forward pass.

    Returns, per index i, logits [n_i, V]: row t predicts continuation token t from the true
    prefix prompt + x_<t. Sequences are right-padded (causal attention: padding after a
    position never changes it), and only the last K logits are kept, K covering every
    sequence's continuation. An encoder-decoder's decoder runs with its prompts' sources encoded.
    """
    from specdec.reference.model.seq2seq import ModelPass

    seqs = [list(samples.prompts[i]) + samples.continuations[i][:-1] for i in indices]  # inputs
    starts = [len(samples.prompts[i]) - 1 for i in indices]  # position predicting x_0
    width = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.tensor(s, dtype=torch.long)
    keep = width - min(starts)
    run = ModelPass(model, [samples.prompts[i] for i in indices])
    logits = run(ids.to(input_device(model)), keep).logits  # [B, keep, V]
    out = []
    for b, i in enumerate(indices):
        first = starts[b] - (width - keep)
        out.append(logits[b, first:first + len(samples.continuations[i])])
    return out


class NeuralScorer:
    """q from a Hugging Face causal LM with the target's vocabulary, batched teacher forcing."""

    def __init__(self, model: torch.nn.Module, confidence_top_k: int = 0) -> None:
        self.model, self.confidence_top_k = model, confidence_top_k

    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        out = []
        for logits in continuation_logits(self.model, samples, indices):
            logits = fit_vocab(logits, vocab_size)  # [n, V]
            confidence = top_confidence(logits.float().softmax(-1), self.confidence_top_k)
            if sampling.greedy:
                out.append(DraftRows(None, logits.argmax(-1), chain=True, confidence=confidence))
            else:
                out.append(DraftRows(sampling.probs(logits), None, chain=True, confidence=confidence))
        return out

    def confidence_after(self, sequence: Sequence[int], starts: Sequence[int], tokens: Sequence[int],
                         vocab_size: int) -> np.ndarray | None:
        """[R] the draft's confidence right after tokens[r] at position starts[r] of `sequence`
        (`estimate.past_rejection`); None where the model takes no such pass (an encoder-decoder)."""
        from specdec.reference.model.forward import branch_logits

        out = []
        for a in range(0, len(tokens), 256):
            logits = branch_logits(self.model, sequence, starts[a:a + 256], tokens[a:a + 256])
            if logits is None:
                return None
            out.append(top_confidence(fit_vocab(logits, vocab_size).float().softmax(-1), self.confidence_top_k))
        return torch.cat(out).double().cpu().numpy() if out else np.zeros(0)


class NgramScorer:
    """q from a KenLM n-gram drafter (`NgramDrafter.score_sequence`), adjusted like its proposals."""

    def __init__(self, drafter, confidence_top_k: int = 0) -> None:
        self.drafter, self.confidence_top_k = drafter, confidence_top_k

    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        out = []
        for i in indices:
            prompt, cont = samples.prompts[i], samples.continuations[i]
            q_all = self.drafter.score_sequence(prompt + cont[:-1])  # [L, V] natural probabilities
            q = torch.from_numpy(np.ascontiguousarray(q_all[len(prompt) - 1:]))  # [n, V]
            stop = self.drafter.model.eos_id if self.drafter.stop_at_eos else None
            confidence = top_confidence(q, self.confidence_top_k)
            if sampling.greedy:
                out.append(DraftRows(None, q.argmax(-1), chain=True, stop_token=stop, confidence=confidence))
            else:
                # the drafter adjusts log q with the target's transform: do the same
                out.append(DraftRows(sampling.probs(torch.log(q)), None, chain=True, stop_token=stop,
                                     confidence=confidence))
        return out

    def confidence_after(self, sequence: Sequence[int], starts: Sequence[int], tokens: Sequence[int],
                         vocab_size: int) -> np.ndarray:
        """[R] the draft's confidence right after tokens[r] at position starts[r] of `sequence`
        (`estimate.past_rejection`): q from the context the token ends."""
        model, bos = self.drafter.model, self.drafter.bos
        seen: dict = {}  # a context once: its last N - 1 tokens are the state
        out = np.zeros(len(tokens))
        for r, (a, x) in enumerate(zip(starts, tokens)):
            state = model.state_for(list(sequence[max(0, int(a) - model.order):int(a)]) + [int(x)], bos)
            if state not in seen:
                seen[state] = float(top_confidence(torch.from_numpy(model.q(state))[None], self.confidence_top_k)[0])
            out[r] = seen[state]
        return out


class ProtocolScorer:
    """Any drafter of the protocol, fed the true sequence token by token (generic, slow).

    Deterministic drafters (q None) at temperature 0 also record their blocks of up to
    max_gamma tokens for `specdec.reference.estimate.replay`. It runs no target pass, so it
    serves drafters that read nothing from the target (`needs`).
    """

    def __init__(self, drafter, max_gamma: int = 16, generator: torch.Generator | None = None) -> None:
        if drafter.needs:
            raise SpecdecError(f"{type(drafter).__name__} reads the target's passes: it needs a teacher-forced "
                             "scorer of its own (teacher_forced_scorer)")
        self.drafter = drafter
        self.max_gamma = max_gamma
        self.generator = generator

    def rows(self, samples: TargetSamples, indices: Sequence[int], sampling: SamplingConfig,
             vocab_size: int) -> list[DraftRows]:
        out = []
        for i in indices:
            prompt, cont = samples.prompts[i], samples.continuations[i]
            self.drafter.start(prompt)
            tokens: list[int] = []
            qs: list[torch.Tensor | None] = []
            blocks: list[list[int]] = []
            for x in cont:
                proposal = self.drafter.propose(self.max_gamma, sampling, self.generator)
                block = proposal.tokens.tolist()
                blocks.append(block)
                tokens.append(block[0] if block else -1)
                qs.append(None if proposal.q is None or not block else proposal.q[0].float())
                self.drafter.commit(Verdict(0, torch.tensor([int(x)]), False), NO_PASS)
            if any(q is not None for q in qs):
                if any(q is None for q in qs):
                    raise ValueError("a drafter returned q for some proposals and None for others")
                out.append(DraftRows(torch.stack(qs), None))
            else:
                out.append(DraftRows(None, torch.tensor(tokens, dtype=torch.long), blocks=blocks))
        return out


def position_scores(p_logits: torch.Tensor, draft: DraftRows, truth: Sequence[int], sampling: SamplingConfig,
                    lenience: Sequence[float], max_gamma: int) -> PositionScores:
    """beta, lenient beta and replay data for one sequence.

    p_logits: [n, V] target logits at the continuation positions; truth: x_0..x_n-1.
    """
    p = sampling.probs(p_logits)  # [n, V] float32
    n = p.shape[0]
    ls = [float(l) for l in lenience]
    lenient_argmax = None
    if draft.tree_roots is not None:  # a token tree: its first level accepts when x_t is among its roots
        beta, lenient, proposed = tree_first_level(p, draft.tree_roots, ls)
    elif draft.q is not None:
        q = draft.q.to(p.device)
        beta = torch.minimum(p, q).sum(-1, dtype=torch.float64)  # [n]
        lenient = torch.stack([torch.minimum(p / l, q).sum(-1, dtype=torch.float64) for l in ls]) if ls else \
            torch.zeros(0, n, dtype=torch.float64)
        proposed = np.ones(n, dtype=bool)
    else:
        token = draft.token.to(p.device)
        proposed_t = token >= 0
        p_x = torch.where(proposed_t, p.gather(-1, token.clamp_min(0)[:, None])[:, 0], torch.zeros_like(p[:, 0]))
        beta = p_x.double()
        lenient = torch.stack([torch.clamp(p_x.double() / l, max=1.0) for l in ls]) if ls else \
            torch.zeros(0, n, dtype=torch.float64)
        proposed = proposed_t.cpu().numpy()
        if sampling.greedy and ls:
            raw = p_logits.float().softmax(-1)  # [n, V] unadjusted target distribution
            raw_x = torch.where(proposed_t, raw.gather(-1, token.clamp_min(0)[:, None])[:, 0],
                                torch.full_like(raw[:, 0], -1.0))
            top = raw.max(-1).values
            lenient_argmax = torch.stack([(raw_x >= l * top).double() for l in ls]).cpu().numpy()
    match = block = accept = nodes = None
    truth = [int(t) for t in truth]
    if draft.tree_match is not None:  # token trees at T = 0, one per draft length
        match, block = draft.tree_match.astype(np.int64), draft.tree_depth.astype(np.int64)
        nodes = None if draft.tree_nodes is None else draft.tree_nodes.astype(np.int64)
    elif draft.blocks is not None:  # deterministic blocks (any drafter at T = 0, prompt lookup at any T)
        block = np.array([len(b) for b in draft.blocks], dtype=np.int64)
        match = np.array([leading_matches(b, truth[t:]) for t, b in enumerate(draft.blocks)], dtype=np.int64)
    elif sampling.greedy and draft.chain:
        tokens = draft.token.cpu().numpy()
        match = chain_matches(tokens == np.asarray(truth), max_gamma)
        block = chain_blocks(tokens, match, max_gamma, draft.stop_token)
    elif draft.q is not None and (draft.chain or draft.offset_q is not None):
        accept = path_accept(p, draft, truth, max_gamma)
        block = np.full(n, accept.shape[0], dtype=np.int64)
    # sum_x min(p, q) <= 1 exactly; float32 rows can overshoot by ~1e-7
    beta, lenient = beta.clamp(0.0, 1.0), lenient.clamp(0.0, 1.0)
    return PositionScores(beta.cpu().numpy(), lenient.cpu().numpy(), lenient_argmax, proposed, match, block,
                          proposes_tokens=draft.q is None and not draft.chain, offset_beta=offset_beta(p, draft),
                          path_accept=accept,
                          confidence=None if draft.confidence is None else draft.confidence.double().cpu().numpy(),
                          nodes=nodes)


@torch.inference_mode()
def score_positions(target: torch.nn.Module, scorer: DraftScorer, samples: TargetSamples, sampling: SamplingConfig,
                    vocab_size: int, lenience: Sequence[float] = (1.0,), batch_size: int = 8,
                    max_gamma: int = 16, progress: bool = False) -> list[PositionScores]:
    """Teacher-forced PositionScores for every sample, batch_size sequences per forward pass."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out: list[PositionScores] = []
    n = len(samples.prompts)
    bar = progress_bar(samples.n_positions, "teacher-forced scoring", "pos", progress)
    for b in range(0, n, batch_size):
        indices = list(range(b, min(n, b + batch_size)))
        p_logits = continuation_logits(target, samples, indices)
        drafts = scorer.rows(samples, indices, sampling, vocab_size)
        for i, logits, draft in zip(indices, p_logits, drafts):
            out.append(position_scores(logits[:, :vocab_size], draft, samples.continuations[i], sampling,
                                       lenience, max_gamma))
            if draft.confidence is not None and hasattr(scorer, "confidence_after"):
                out[-1].past_rejection = past_rejection(scorer, logits[:, :vocab_size], draft, samples, i, sampling,
                                                        vocab_size)
            bar.update(len(samples.continuations[i]))
    bar.close()
    return out


def past_rejection(scorer, p_logits: torch.Tensor, draft: DraftRows, samples: TargetSamples, i: int,
                   sampling: SamplingConfig, vocab_size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(confidence [R], weight [R]) of the draft right after its rejected tokens along sequence i
    (`estimate.past_rejection`); None where the scorer cannot say."""
    from specdec.reference.estimate.past_rejection import rejected_tokens

    prompt, truth = list(samples.prompts[i]), samples.continuations[i]
    t, tokens, weight = rejected_tokens(p_logits, draft, truth, sampling)
    confidence = scorer.confidence_after(prompt + list(truth), (len(prompt) + t).tolist(), tokens.tolist(), vocab_size)
    return None if confidence is None else (confidence, weight)
