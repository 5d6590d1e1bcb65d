"""Timing the target and the drafter: t(k), v(k), the draft step, the decode loop's overhead.

Names follow Leviathan et al. (ICML 2023); v(k) = t(k) / t(1) is the verify-cost curve.
Every time is the median of repeated runs after warm-up runs, with the GPU queue drained
before each clock reading. What is timed and why: docs/estimator.md.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from specdec.reference.model.placement import input_device, output_device
from specdec.reference.core.rules import SpeculativeSampling
from specdec.reference.core.policy import FixedGamma, KeepGoing
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.step import Request, StageClock, Step
from specdec.reference.core.scorer import PerSlot
from specdec.reference.model.target import TargetScorer
from specdec.reference.core.seams import NO_PASS, Proposal, Scored, Verdict
from specdec.reference.core.prompt import with_ids
from specdec.reference.model.seq2seq import ModelPass
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.drafters.slots import Forked


def sync(device: torch.device) -> None:
    """Wait for queued GPU work so the clock measures it (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def context_of(tokens: Sequence[int], length: int) -> list[int]:
    """`length` real token ids (tokens repeated if too short; an encoder-decoder prompt's source kept)."""
    if not tokens:
        raise ValueError("need at least one token to build a timing context")
    reps = -(-length // len(tokens))
    return with_ids(tokens, (list(tokens) * reps)[:length])


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


def time_target_passes(model: torch.nn.Module, tokens: Sequence[int], context_tokens: int = 128, max_k: int = 16,
                       repeats: int = 7, warmup: int = 2) -> TargetTiming:
    """t(k) and v(k) for k = 1..max_k with the KV cache at context_tokens tokens."""
    return time_contexts(model, tokens, [context_tokens], max_k, repeats, warmup)[0]


@torch.inference_mode()
def time_contexts(model: torch.nn.Module, tokens: Sequence[int], contexts: Sequence[int], max_k: int = 16,
                  repeats: int = 7, warmup: int = 2) -> list[TargetTiming]:
    """t(k) and v(k) for k = 1..max_k at each KV-cache length in `contexts` (one timing each, in order).

    Each k-token pass is one call of the decode step (`specdec.reference.core.step`, a batch of one as
    `decode` drives it): the pending token and k - 1 drafts (the text's next tokens) through the target's
    KV session, a verdict that keeps none (`RejectDrafts`), the commit that crops them as after a rejection
    (`crop_seconds`: the median commit after a pass with drafts), the session rewound to its length. Each
    length keeps its own session; lengths and k's are interleaved within each repeat so slow drifts hit
    every (length, k) alike; t(1) follows an untimed one-token pass, as a probe's does (`TargetProbe`), so
    each k follows a pass of about its own size. An encoder-decoder's `tokens` is a prompt with its source
    (`TokenPrompt`): the decoder is timed, its source encoded once. Why so: docs/estimator.md.
    """
    if not contexts or min(contexts) < 1 or max_k < 1:
        raise ValueError(f"need context lengths >= 1 and max_k >= 1, got {list(contexts)}, {max_k}")
    ids = context_of(tokens, max(contexts) + max_k)
    steps = [verify_step(model, tokens, ids, n, max_k) for n in contexts]
    runs = [[[] for _ in range(max_k)] for _ in contexts]
    crops: list[list[float]] = [[] for _ in contexts]
    for r in range(warmup + repeats):
        for i, (n, step) in enumerate(zip(contexts, steps)):
            for k in range(1, max_k + 1):
                for _ in range(2 if k == 1 else 1):  # room k - 1: the pending token and k - 1 drafts
                    done = step([Request(0, k)])
                    step.target.target.rewind(n)  # the CommitClock's TargetScorer
                if r >= warmup:
                    runs[i][k - 1].append(done.pass_seconds)
                    if k > 1 or max_k == 1:
                        crops[i].append(step.target.seconds[-1])
    return [_timing_from_runs(n, runs[i], float(np.median(crops[i])), repeats, warmup, str(output_device(model)))
            for i, n in enumerate(contexts)]


def verify_step(model: torch.nn.Module, tokens: Sequence[int], ids: Sequence[int], n: int, max_k: int) -> Step:
    """The decode step (a batch of one) over a KV session started on ids[:n], whose drafts are
    the text's next max_k - 1 tokens and whose verdict keeps none: `step([Request(0, k)])` is one
    k-token verify pass, `step.target.target.rewind(n)` takes the session back."""
    drafts = FixedDrafter(torch.tensor(list(ids[n:n + max_k - 1]), dtype=torch.long), None)
    return fixed_draft_step(CommitClock(TargetScorer(model)), drafts, SamplingConfig(temperature=0.0), RejectDrafts(),
                            max_k, with_ids(tokens, list(ids[:n])))


def fixed_draft_step(row: PerSlot, drafts: FixedDrafter, sampling: SamplingConfig, rule, max_k: int,
                     prompt: Sequence[int]) -> Step:
    """The decode step (a batch of one) of the target `row` with a drafter of fixed drafts, up to
    max_k - 1 of them, started on `prompt`: the timings' one way to run the step the decode runs."""
    step = Step(row, Forked([drafts]), FixedGamma(max_k - 1), sampling, rule, DecodeStats(max_k - 1),
                StageClock(row.output_device))
    step.start(0, prompt)
    return step


class RejectDrafts:
    """An acceptance rule that keeps no draft: every request emits its target's first token."""

    def __call__(self, logits: Sequence[torch.Tensor], proposals: Sequence[Proposal], sampling: SamplingConfig,
                 generators: Sequence[torch.Generator | None]) -> list[Verdict]:
        return [Verdict(0, row[:1].argmax(-1), len(proposal) == 0) for row, proposal in zip(logits, proposals)]


class CommitClock(PerSlot):
    """The target's one row, its commits timed (`seconds`): keeping the accepted drafts' cache
    entries and cropping the rest."""

    def __init__(self, target: TargetScorer) -> None:
        super().__init__([target])
        self.seconds: list[float] = []

    def commit(self, slot: int, verdict: Verdict) -> None:
        sync(self.output_device)
        start = time.perf_counter()
        super().commit(slot, verdict)
        sync(self.output_device)
        self.seconds.append(time.perf_counter() - start)


def _timing_from_runs(context_tokens: int, runs: list[list[float]], crop_seconds: float, repeats: int,
                      warmup: int, device: str) -> TargetTiming:
    """Medians, v(k) and spreads from the raw runs of each k (runs[k-1]). A k-token pass does the
    one-token pass's work and more, so a median below t(1) (a pass of microseconds on a tiny
    model, the timer's noise) is raised to t(1): v(k) >= 1, as the plan requires of every curve;
    the raw runs are kept as measured."""
    medians = [float(np.median(r)) for r in runs]
    seconds = [medians[0]] + [max(m, medians[0]) for m in medians[1:]]
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
    """Median draft cost per drafted token (propose + commit, divided by the tokens drafted);
    target_seconds: the median one-token target pass timed before each cycle (after another one:
    the clean pass); cycle_c: the median of each cycle's draft seconds per drafted token over its
    clean pass, so the machine's speed drift cancels in it as it does in v(k); next_pass: the
    median of what the target's next pass lost to the cycle before it, over the clean pass timed
    beside it (the weights the cycle evicted), a share of one pass per cycle; c = cycle_c +
    next_pass (when above 0) per drafted token: all the time the drafter adds."""

    token_seconds: float
    iteration_seconds: float
    mean_proposed: float
    gamma: int
    repeats: int
    target_seconds: float
    c: float
    next_pass: float = 0.0
    cycle_c: float | None = None  # None: c is the cycle's own

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_draft_steps(drafter, target: torch.nn.Module, tokens: Sequence[int], sampling: SamplingConfig,
                     context_tokens: int = 128, gamma: int = 4, repeats: int = 20, warmup: int = 3,
                     generator: torch.Generator | None = None) -> DraftTiming:
    """Time the drafter's propose(gamma) + commit cycle from real contexts, each cycle paired with
    the target passes around it.

    The drafter starts on the first context_tokens ids (after one target pass over them when
    it reads the target's hidden states: `needs`); each cycle proposes, then commits the next
    true token with nothing accepted (so the context moves along real text and speculative
    state is discarded as after a rejection; a hidden-state drafter keeps drafting from the
    first pass's state, as no target pass runs between cycles). Before each cycle two one-token
    target passes at the same context are timed (`TargetProbe`): the first runs right after the
    previous cycle, as the verify pass does in decoding; the second after the first, clean. The
    drafter starts as cold as in decoding, right after a target pass streamed the target's
    weights through the CPU's caches, and c is the cycle's own ratio to the clean pass. Timed
    apart (the target's t(1) minutes before the draft's cycles), the draft model's c moved
    0.17-0.24 between categories of one main job as the machine's speed drifted (2026-11-26).

    What the first pass loses to the cycle is the drafter's too (a draft model's passes evict the
    target's weights): `next_pass`, in c (docs/estimator.md, "What the cost estimate times").
    """
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    ids = context_of(tokens, context_tokens + warmup + repeats)
    context = with_ids(tokens, ids[:context_tokens])
    prefill = TargetScorer(target).start(context, needs=drafter.needs) if drafter.needs else None
    drafter.start(context, prefill)
    last = prefill if prefill is not None else NO_PASS
    device = output_device(target)
    probe = TargetProbe(target, context, max(context_tokens - 1, 1), passes=1)
    per_iter, proposed, clean, lost = [], [], [], []
    for i in range(warmup + repeats + 1):
        first = probe()  # right after the previous cycle
        step = probe()  # after a target pass: clean
        if i > warmup:
            lost.append((first - step) / step)  # what cycle i - 1 cost the target's next pass, at this moment
        if i == warmup + repeats:
            break
        sync(device)
        start = time.perf_counter()
        proposal = drafter.propose(gamma, sampling, generator)
        drafter.commit(Verdict(0, torch.tensor([ids[context_tokens + i]]), False), last)
        sync(device)
        elapsed = time.perf_counter() - start
        if i >= warmup:
            per_iter.append(elapsed)
            proposed.append(len(proposal))
            clean.append(step)
    seconds, kept, clean = np.array(per_iter), np.maximum(proposed, 1), np.array(clean)
    cycle = float(np.median(seconds / kept / clean))
    next_pass = float(np.median(lost))  # below 0 only by noise: no cycle speeds the target up
    return DraftTiming(float(np.median(seconds / kept)), float(np.median(seconds)), float(np.mean(proposed)),
                       gamma, repeats, float(np.median(clean)), cycle + max(next_pass, 0.0) / float(np.mean(kept)),
                       next_pass, cycle)


def last_level_cache_bytes() -> int:
    """The largest CPU cache this machine reports (Linux sysfs), or 32 MiB where none is readable."""
    from pathlib import Path

    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip() if entry.is_file() else ""
        if text[:-1].isdigit() and text[-1] in units:
            sizes.append(int(text[:-1]) * units[text[-1]])
    return max(sizes, default=32 << 20)


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes a pass of the model streams through the caches: its parameters and buffers, where
    the fast backend runs a layer its packed copy in place of its weights."""
    replaced = {id(w) for m in model.modules() if hasattr(m, "streamed_instead") for w in m.streamed_instead()}
    streamed = {id(t): t for t in (*model.parameters(), *model.buffers()) if id(t) not in replaced}
    return sum(t.numel() * t.element_size() for t in streamed.values())


class CacheEvictor:
    """Reads a buffer through the CPU's caches, so what runs next starts as cold as it would in
    decoding, right after a target pass (a no-op off the CPU): as many bytes as that pass
    streams (`nbytes`, default: no limit), at most twice the last-level cache (more evicts
    nothing more).

    Why: timed back to back, a drafter's tables or weights stay cached; in decoding each
    proposal follows a target pass that evicts them (`time_draft_steps` now runs that pass
    itself; this stands in where no target pass is at hand: the heads' tree timing). The heads
    drafter (27 MB of weights) spent 1.46 ms per iteration drafting in decode against 0.49 ms predicted from
    warm-cache timings (main job, 2026-11-22); the n-gram drafters 0.41 against 0.10. A fixed 64 MiB
    buffer (twice the 32 MiB L3 of the machines then) evicted nothing on a VM reporting a
    480 MiB L3 (2026-11-25): the feature draft's drafting time was predicted at half what
    decoding spent."""

    def __init__(self, device: torch.device, nbytes: int | None = None) -> None:
        limit = 2 * last_level_cache_bytes()
        size = limit if nbytes is None else min(nbytes, limit)
        self.buffer = torch.zeros(max(size, 4) // 4) if device.type == "cpu" else None

    def __call__(self) -> None:
        if self.buffer is not None:  # read, as a pass reads its weights: written lines would be written back
            self.buffer.sum()        # during the timed step that evicts them


class FixedDrafter(DrafterBase):
    """Proposes the same k tokens (with q rows when sampling) at no cost."""

    def __init__(self, tokens: torch.Tensor, q: torch.Tensor | None) -> None:
        self.tokens, self.q = tokens, q

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        pass

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        return Proposal(self.tokens[:gamma], None if self.q is None else self.q[:gamma])

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        pass


@dataclass(frozen=True)
class StepOverhead:
    """o(0..K-1) in seconds in two parts: after_pass[k], the step's time outside its pass and proposal
    (the rule, the commit and its crop, the bookkeeping); tail[k], what the passes' mean adds to their median."""

    after_pass: list[float]
    tail: list[float]

    @property
    def seconds(self) -> list[float]:
        """o(k): both parts."""
        return [a + t for a, t in zip(self.after_pass, self.tail)]


@torch.inference_mode()
def time_step_overhead(model: torch.nn.Module, tokens: Sequence[int], context_tokens: int, sampling: SamplingConfig,
                       max_k: int, repeats: int = 12, warmup: int = 2,
                       generator: torch.Generator | None = None) -> StepOverhead:
    """o(0..max_k - 1) in seconds, in its two parts (`StepOverhead`): what one decode step with k
    drafts costs beyond its target pass's median time and its drafter's proposal, timed through the
    decode step with the real target, the session rewound after each step, the k's interleaved
    within each repeat. Draft j is the argmax of the target's row after its own (at T > 0 with q =
    that row), so most are rejected, as at most iterations of decoding. after_pass[k] = mean(step -
    proposal - pass); tail[k] = (the passes' mean over their median, pooled over k, - 1) x the
    median pass with k drafts. Why so: docs/estimator.md, "What the cost estimate times"."""
    if context_tokens < 1 or max_k < 1 or repeats < 1:
        raise ValueError(f"need context_tokens, max_k and repeats >= 1, got {context_tokens}, {max_k}, {repeats}")
    ids = context_of(tokens, context_tokens + max_k - 1)
    following = target_logits(model, ids, max_k)[1:]  # the row after each draft's own
    drafts = FixedDrafter(following.argmax(-1), None if sampling.greedy else sampling.probs(following))
    step = fixed_draft_step(PerSlot([TargetScorer(model)]), drafts, sampling, SpeculativeSampling(), max_k,
                            with_ids(tokens, list(ids[:context_tokens])))
    other: list[list[float]] = [[] for _ in range(max_k)]
    passes: list[list[float]] = [[] for _ in range(max_k)]
    for r in range(warmup + repeats):
        for k in range(max_k):
            start = step.clock.now()
            done = step([Request(0, k + 1, generator)])  # room k: k drafts
            seconds = step.clock.now() - start
            step.target.target.rewind(context_tokens)
            if r >= warmup:
                other[k].append(seconds - done.pass_seconds - done.draft_seconds)
                passes[k].append(done.pass_seconds)
    medians = [float(np.median(p)) for p in passes]
    tail = float(np.sum(passes) / (repeats * sum(medians)))
    return StepOverhead([float(np.mean(o)) for o in other], [(tail - 1.0) * m for m in medians])


def target_logits(model: torch.nn.Module, tokens: Sequence[int], rows: int) -> torch.Tensor:
    """Real target logits for the last `rows` positions of tokens: [rows, V] (the overhead timing's q)."""
    with torch.inference_mode():
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=input_device(model))
        return ModelPass(model, [tokens])(ids, rows).logits[0].float()


class TargetProbe:
    """A quick speed reference: the median time of a few one-token target passes at a fixed
    context, each one call of the decode step as `time_contexts` times t(1) (its own session,
    rewound after each pass), so a probe and t(1) are the same measurement.

    Used between decode runs so that each run's walltime can be expressed in target steps
    of that moment: on a machine whose speed drifts (a VM's CPU share changing within
    seconds), time / probe cancels the drift that a single up-front t(1) cannot.
    """

    def __init__(self, model: torch.nn.Module, tokens: Sequence[int], context_tokens: int = 96,
                 passes: int = 3) -> None:
        self.passes, self.context_tokens = passes, context_tokens
        self.step = verify_step(model, tokens, context_of(tokens, context_tokens + 1), context_tokens, 1)

    @torch.inference_mode()
    def __call__(self) -> float:
        times = []
        for _ in range(self.passes):
            times.append(self.step([Request(0, 1)]).pass_seconds)
            self.step.target.target.rewind(self.context_tokens)
        return float(np.median(times))
