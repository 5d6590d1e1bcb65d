"""Estimate the cost side of speculative decoding: c, the verify-cost curve v(k), c_hat.

Names follow Leviathan et al. (ICML 2023): `c` = time of one draft step / time of one
target step (Definition 7), `c_hat` = arithmetic operations per token of the draft / of
the target (Definition before Theorem 10), `gamma` draft tokens per iteration.

Every time is the MEDIAN of repeated runs after warm-up runs, measured with
time.perf_counter around the work, with torch.cuda.synchronize before reading the clock on
a GPU. What is timed, at a stated context length L (tokens already in the KV cache):

- target step t(k): one forward pass of the target over k new tokens with the KV cache at
  L tokens, keeping k rows of logits (what `TargetScorer.score` does for k - 1 drafts), for
  k = 1..K; the cache is cropped back after each run. v(k) = t(k) / t(1), so v(1) = 1; the
  paper's Theorem 8 assumes v == 1 (spare parallel compute), which a CPU does not have.
- draft step: one `propose(gamma)` + `commit` cycle of the real drafter from a real context,
  divided by the number of drafted tokens (what the decoder books as draft time). c is its
  median over t(1).
- loop overhead o(k): the decoder's own per-iteration work besides the two models — the
  sampling transform of k + 1 target rows, the verifier, bookkeeping — measured by running
  the real `speculative_decode` loop with a stub target that returns fixed logits and a
  stub drafter that proposes k tokens at no cost; plus the KV-cache crop after a rejection.
  Theorem 8 has no such term; `reference.validation` adds it to the extended model.

c_hat is computed, not timed: 2 x (non-embedding parameters + output layer) FLOPs per
token for a neural model (attention over the context is ignored), about (order + 2) x V
operations for an n-gram drafter (building q over the vocabulary: ~0), and 0 for prompt
lookup.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from reference.decoder import speculative_decode
from reference.drafter import Proposal
from reference.sampling import SamplingConfig


def sync(device: torch.device) -> None:
    """Wait for queued GPU work so the clock measures it (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(fn: Callable[[], Any], repeats: int, warmup: int, device: torch.device,
                after: Callable[[], Any] | None = None) -> tuple[float, np.ndarray]:
    """(median, all times) of fn() over `repeats` runs after `warmup` untimed runs.

    `after` (untimed) restores state between runs, e.g. crops a KV cache.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    times = []
    for i in range(warmup + repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
        if after is not None:
            after()
    arr = np.asarray(times)
    return float(np.median(arr)), arr


def context_of(tokens: Sequence[int], length: int) -> list[int]:
    """`length` real token ids (tokens repeated if too short)."""
    if not tokens:
        raise ValueError("need at least one token to build a timing context")
    reps = -(-length // len(tokens))
    return (list(tokens) * reps)[:length]


@dataclass
class TargetTiming:
    """Median target pass times at one context length.

    seconds[k-1]: one pass over k new tokens (k = 1..K); verify_cost[k-1] = v(k);
    crop_seconds: cropping k tokens from the KV cache (median over k); spread: relative
    interquartile range of each k's runs (noise indicator); runs[k-1]: every timed run.
    """

    context_tokens: int
    seconds: list[float]
    verify_cost: list[float]
    spread: list[float]
    crop_seconds: float
    repeats: int
    warmup: int
    threads: int
    device: str
    runs: list[list[float]] = field(default_factory=list, repr=False)

    @property
    def step_seconds(self) -> float:
        return self.seconds[0]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.inference_mode()
def time_target_passes(model: torch.nn.Module, tokens: Sequence[int], context_tokens: int = 128, max_k: int = 16,
                       repeats: int = 7, warmup: int = 2) -> TargetTiming:
    """t(k) and v(k) for k = 1..max_k with the KV cache at context_tokens tokens.

    The k's are interleaved within each repeat so slow drifts of the machine hit every k.
    """
    from transformers import DynamicCache

    if context_tokens < 1 or max_k < 1:
        raise ValueError(f"need context_tokens >= 1 and max_k >= 1, got {context_tokens}, {max_k}")
    device = model.device
    ids = torch.tensor([context_of(tokens, context_tokens + max_k)], dtype=torch.long, device=device)
    cache = DynamicCache(config=model.config)
    model(input_ids=ids[:, :context_tokens], past_key_values=cache, use_cache=True, logits_to_keep=1)
    runs: dict[int, list[float]] = {k: [] for k in range(1, max_k + 1)}
    crops: list[float] = []
    for r in range(warmup + repeats):
        for k in range(1, max_k + 1):
            x = ids[:, context_tokens:context_tokens + k]
            sync(device)
            start = time.perf_counter()
            model(input_ids=x, past_key_values=cache, use_cache=True, logits_to_keep=k)
            sync(device)
            mid = time.perf_counter()
            cache.crop(-k)  # transformers 5: negative = number of tokens to drop
            sync(device)
            end = time.perf_counter()
            if r >= warmup:
                runs[k].append(mid - start)
                crops.append(end - mid)
    return _timing_from_runs(context_tokens, [runs[k] for k in range(1, max_k + 1)], float(np.median(crops)),
                             repeats, warmup, str(device))


def _timing_from_runs(context_tokens: int, runs: list[list[float]], crop_seconds: float, repeats: int,
                      warmup: int, device: str) -> TargetTiming:
    """Medians, v(k) and spreads from the raw runs of each k (runs[k-1])."""
    seconds = [float(np.median(r)) for r in runs]
    spread = [float((np.quantile(r, 0.75) - np.quantile(r, 0.25)) / np.median(r)) for r in runs]
    return TargetTiming(context_tokens, seconds, [s / seconds[0] for s in seconds], spread, crop_seconds,
                        repeats, warmup, torch.get_num_threads(), device, [list(r) for r in runs])


def pool_timings(timings: Sequence[TargetTiming]) -> TargetTiming:
    """One timing from several (e.g. sweeps taken between decode runs): the runs of every k
    are pooled, k = 1..K of the longest; each k's median uses every sweep that timed it."""
    if not timings:
        raise ValueError("nothing to pool")
    top = max(len(t.runs) for t in timings)
    runs = [[x for t in timings if len(t.runs) > k for x in t.runs[k]] for k in range(top)]
    first = timings[0]
    return _timing_from_runs(first.context_tokens, runs, float(np.median([t.crop_seconds for t in timings])),
                             sum(t.repeats for t in timings), first.warmup, first.device)


@dataclass
class DraftTiming:
    """Median draft cost per drafted token (propose + commit, divided by the tokens drafted)."""

    token_seconds: float
    iteration_seconds: float
    mean_proposed: float
    gamma: int
    repeats: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_draft_steps(drafter, tokens: Sequence[int], sampling: SamplingConfig, context_tokens: int = 128,
                     gamma: int = 4, repeats: int = 20, warmup: int = 3, generator: torch.Generator | None = None,
                     device: torch.device = torch.device("cpu")) -> DraftTiming:
    """Time the drafter's propose(gamma) + commit cycle from real contexts.

    The drafter starts on the first context_tokens ids; each cycle proposes, then commits
    the next true token with nothing accepted (so the context moves along real text and
    speculative state is discarded as after a rejection).
    """
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    ids = context_of(tokens, context_tokens + warmup + repeats)
    drafter.start(ids[:context_tokens])
    per_token, per_iter, proposed = [], [], []
    for i in range(warmup + repeats):
        sync(device)
        start = time.perf_counter()
        proposal = drafter.propose(gamma, sampling, generator)
        drafter.commit(0, [ids[context_tokens + i]])
        sync(device)
        elapsed = time.perf_counter() - start
        if i >= warmup:
            k = len(proposal)
            per_iter.append(elapsed)
            per_token.append(elapsed / max(k, 1))
            proposed.append(k)
    return DraftTiming(float(np.median(per_token)), float(np.median(per_iter)), float(np.mean(proposed)),
                       gamma, repeats)


class _StubScorer:
    """A target scorer that returns fixed logits instantly (for timing the decoder loop)."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits  # [K + 1, V]
        self.session = type("Session", (), {"device": logits.device, "forward_passes": 0})()

    def start(self, prompt: Sequence[int], fuse_prefill: bool = False) -> None:
        pass

    def score(self, draft: Sequence[int]) -> torch.Tensor:
        return self.logits[:len(draft) + 1]

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        pass


class _StubDrafter:
    """Proposes the same k tokens (with q rows when sampling) at no cost."""

    def __init__(self, tokens: torch.Tensor, q: torch.Tensor | None) -> None:
        self.tokens, self.q = tokens, q

    def start(self, prompt: Sequence[int]) -> None:
        pass

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None) -> Proposal:
        return Proposal(self.tokens[:gamma], None if self.q is None else self.q[:gamma])

    def commit(self, n_accepted: int, tokens: Sequence[int]) -> None:
        pass


def time_loop_overhead(logits: torch.Tensor, sampling: SamplingConfig, ks: Sequence[int], tokens: int = 64,
                       repeats: int = 3, generator: torch.Generator | None = None) -> list[float]:
    """Decoder seconds per iteration spent outside the models, for each draft length k in ks.

    logits: real target logits [K + 1, V] (K >= max(ks)). Drafts are the argmax tokens of the
    next rows (so some are accepted); at T > 0 their q is the adjusted next row.
    """
    if logits.shape[0] < max(ks) + 1:
        raise ValueError(f"need {max(ks) + 1} rows of logits, got {logits.shape[0]}")
    rolled = logits.roll(-1, dims=0)
    draft_tokens = rolled.argmax(-1)  # [K + 1]
    q = None if sampling.greedy else sampling.probs(rolled)
    out = []
    for k in ks:
        stub = _StubScorer(logits)
        best = float("inf")
        for _ in range(repeats):
            result = speculative_decode(stub, _StubDrafter(draft_tokens, q) if k > 0 else None, [0], tokens, k,
                                        sampling, generator)
            s = result.stats
            best = min(best, (s.time_total - s.time_prefill) / s.iterations)
        out.append(best)
    return out


def flops_per_token(model: torch.nn.Module) -> float:
    """2 x (parameters used as matrices per token): everything but input embeddings, plus the
    output layer (counted once even when tied to the input embedding)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    matrix = sum(p.numel() for p in model.parameters() if id(p) not in embeddings)
    head = model.get_output_embeddings()
    if head is not None and id(head.weight) in embeddings:
        matrix += head.weight.numel()
    return 2.0 * matrix


def c_hat_for(drafter, target: torch.nn.Module) -> float:
    """Arithmetic ratio c_hat of a drafter object to the target (see the module doc)."""
    from reference.neural_drafter import NeuralDrafter

    target_flops = flops_per_token(target)
    if isinstance(drafter, NeuralDrafter):
        return flops_per_token(drafter.session.model) / target_flops
    order = getattr(drafter, "order", None)
    vocab = getattr(drafter, "vocab_size", None)
    if order is not None and vocab is not None:  # n-gram: ~ (order + 2) operations per vocabulary entry
        return (order + 2) * vocab / target_flops
    return 0.0  # prompt lookup and other table/copy drafters: no arithmetic worth counting


@dataclass
class CostEstimate:
    """c, c_hat, v(k) and the loop overheads for one drafter at one sampling setting.

    overhead_seconds[k]: decoder loop seconds per iteration with k drafts (k = 0..K-1);
    overhead[k] the same in target steps (/ t(1)).
    """

    c: float
    c_hat: float
    target: TargetTiming
    draft: DraftTiming | None
    overhead_seconds: list[float]

    @property
    def verify_cost(self) -> list[float]:
        return self.target.verify_cost

    @property
    def overhead(self) -> list[float]:
        return [o / self.target.step_seconds for o in self.overhead_seconds]

    def to_dict(self) -> dict[str, Any]:
        return {"c": self.c, "c_hat": self.c_hat, "context_tokens": self.target.context_tokens,
                "target_step_seconds": self.target.step_seconds,
                "draft_token_seconds": None if self.draft is None else self.draft.token_seconds,
                "verify_cost": self.verify_cost, "verify_seconds": self.target.seconds,
                "verify_spread": self.target.spread, "crop_seconds": self.target.crop_seconds,
                "overhead_seconds": self.overhead_seconds, "overhead": self.overhead,
                "draft": None if self.draft is None else self.draft.to_dict(),
                "repeats": self.target.repeats, "threads": self.target.threads, "device": self.target.device}


def target_logits(model: torch.nn.Module, tokens: Sequence[int], rows: int) -> torch.Tensor:
    """Real target logits for the last `rows` positions of tokens: [rows, V] (for overhead timing)."""
    with torch.inference_mode():
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=model.device)
        return model(input_ids=ids, logits_to_keep=rows).logits[0].float()


def estimate_cost(target: torch.nn.Module, drafter, tokens: Sequence[int], sampling: SamplingConfig,
                  context_tokens: int = 128, max_k: int = 16, repeats: int = 7, draft_gamma: int = 4,
                  draft_repeats: int = 20, generator: torch.Generator | None = None,
                  target_timing: TargetTiming | None = None) -> CostEstimate:
    """c (timed), c_hat (counted), v(1..max_k) and loop overheads o(0..max_k-1).

    tokens: real token ids for the contexts (e.g. a held-out prompt and its continuation).
    target_timing: reuse a `time_target_passes` result (it does not depend on the drafter).
    """
    timing = target_timing or time_target_passes(target, tokens, context_tokens, max_k, repeats)
    draft = None
    c = 0.0
    if drafter is not None:
        draft = time_draft_steps(drafter, tokens, sampling, context_tokens, draft_gamma, draft_repeats,
                                 generator=generator, device=target.device)
        c = draft.token_seconds / timing.step_seconds
    logits = target_logits(target, context_of(tokens, context_tokens + max_k), max_k + 1)
    overhead = time_loop_overhead(logits, sampling, list(range(max_k)), generator=generator)
    overhead = [o + (timing.crop_seconds if k > 0 else 0.0) for k, o in enumerate(overhead)]
    return CostEstimate(c, 0.0 if drafter is None else c_hat_for(drafter, target), timing, draft, overhead)


class TargetProbe:
    """A quick speed reference: the median time of a few one-token target passes at a fixed
    context, with its own KV cache (cropped back after each pass).

    Used between decode runs so that each run's walltime can be expressed in target steps
    of that moment: on a machine whose speed drifts (a VM's CPU share changing within
    seconds), time / probe cancels the drift that a single up-front t(1) cannot.
    """

    def __init__(self, model: torch.nn.Module, tokens: Sequence[int], context_tokens: int = 96,
                 passes: int = 3) -> None:
        from transformers import DynamicCache

        self.model, self.passes = model, passes
        self.ids = torch.tensor([context_of(tokens, context_tokens + 1)], dtype=torch.long, device=model.device)
        self.cache = DynamicCache(config=model.config)
        with torch.inference_mode():
            model(input_ids=self.ids[:, :context_tokens], past_key_values=self.cache, use_cache=True,
                  logits_to_keep=1)
        self.context_tokens = context_tokens

    @torch.inference_mode()
    def __call__(self) -> float:
        device = self.model.device
        times = []
        x = self.ids[:, self.context_tokens:self.context_tokens + 1]
        for _ in range(self.passes):
            sync(device)
            start = time.perf_counter()
            self.model(input_ids=x, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
            sync(device)
            times.append(time.perf_counter() - start)
            self.cache.crop(-1)
        return float(np.median(times))
