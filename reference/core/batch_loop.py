"""The decode loop for a ragged batch with continuous batching: a driver of the one decode step.

B slots decode B requests at once: each iteration is one call of the decode step
(`specdec.reference.core.step`): every busy slot's drafter proposes (up to the draft-length
policy's budget for that slot), one target pass scores every slot's pending token and drafts
(`BatchScorer.score`), one call of the acceptance rule gives every slot its verdict, so slots
accept different counts. A slot whose request is done (its token budget or eos) takes the next
prompt from the queue at once: with `token_budget` the queue cycles through the prompts and the
run stops at the first iteration that reaches the budget, so every iteration has all B slots
busy (steady state, no tail of idle rows). Without it each prompt is decoded once and the run
ends when the queue and the slots are empty. Every request draws from its own generator, so its
output does not depend on its batch-mates.

The clock excludes the prompts' encodings (a slot's prefill is timed apart, as the batch-1
loop's `time_prefill`): the decode throughput of a serving engine whose prefills run
elsewhere. The per-iteration seconds and each slot's emitted count are kept, so per-token
latency (an iteration's seconds / the tokens a slot emitted in it) and each request's time
per output token come from the same run. The drafter serves the slots through its
`Drafter.slots` (a neural draft model drafts every slot in one pass per position; other
drafters fork one per slot).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from specdec.errors import SpecdecError
from specdec.reference.core.loop import DecodeResult, check_trees
from specdec.reference.core.policy import DraftPolicy, as_policy
from specdec.reference.core.rules import AcceptanceRule, SpeculativeSampling
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seeds import prompt_generators
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.step import Request, StageClock, Step
from specdec.reference.drafters.protocol import Drafter

if TYPE_CHECKING:  # the model side, below the scorer seam
    from specdec.reference.model.batch_scorer import BatchScorer


@dataclass
class BatchResult(DecodeResult):
    """A batch run. tokens: the finished requests' outputs, concatenated in finishing order;
    outputs[j]: (queue position, tokens) of each finished request; stats: counts summed over
    slots (stats.iterations = slot-iterations; passes = target passes), time_total and
    time_prefill as in the batch-1 loop (the slots' prefills summed, excluded from decode).

    iteration_seconds[i]: decode seconds of pass i (drafting, the pass, verdicts); pass_seconds[i]:
    the target pass alone; draft_seconds[i]: its proposals alone;
    emitted[i][s]: tokens slot s emitted in pass i (0: idle); joint[k, n]: slot-iterations that
    fed the target k drafts (a tree: its nodes) and accepted n; request_seconds: per finished request (in `outputs` order)."""

    outputs: list[tuple[int, list[int]]] = field(default_factory=list)
    batch: int = 1
    iteration_seconds: list[float] = field(default_factory=list)
    pass_seconds: list[float] = field(default_factory=list)
    draft_seconds: list[float] = field(default_factory=list)
    emitted: list[list[int]] = field(default_factory=list)
    joint: np.ndarray = field(default_factory=lambda: np.zeros((1, 1), dtype=np.int64))
    request_seconds: list[float] = field(default_factory=list)

    @property
    def passes(self) -> int:
        """Target passes (iterations of the batch)."""
        return len(self.iteration_seconds)

    @property
    def request_tokens(self) -> list[int]:
        """Tokens of each finished request (in `outputs` order)."""
        return [len(tokens) for _, tokens in self.outputs]

    def throughput(self) -> float:
        """Tokens per second over the batch (decode seconds)."""
        seconds = self.stats.time_total - self.stats.time_prefill
        return self.stats.new_tokens / seconds if seconds > 0 else float("nan")

    def token_latencies(self) -> tuple[np.ndarray, np.ndarray]:
        """(seconds per token, tokens) over slot-iterations: a slot that emitted m tokens in a
        pass of s seconds gives m tokens of s / m each."""
        t = np.repeat(np.asarray(self.iteration_seconds), self.batch)
        m = np.asarray(self.emitted, dtype=np.int64).reshape(-1)
        busy = m > 0
        return t[busy] / m[busy], m[busy]


def decode_batch(scorer: BatchScorer, drafter: Drafter, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                 gamma: int | DraftPolicy, sampling: SamplingConfig, seed: int | None,
                 rule: AcceptanceRule = SpeculativeSampling(), eos_id: int | None = None,
                 token_budget: int | None = None, start_at: int = 0) -> BatchResult:
    """Decode the queue `prompts` (from position start_at, cycling when token_budget is set)
    with scorer.rows slots; every request gets up to max_new_tokens tokens. gamma: a fixed draft
    length or a draft-length policy (`specdec.reference.core.policy`), asked per slot. seed: the i-th
    request taken from the queue (i counted from start_at) draws from its own generator seeded
    `derive_seed(seed, i)` (`specdec.reference.core.seeds`), for its drafts and its verdicts, so its
    output never depends on its batch-mates (None: the global generator, for greedy runs)."""
    if max_new_tokens < 1 or not prompts:
        raise SpecdecError(f"need max_new_tokens >= 1 and prompts, got {max_new_tokens}, {len(prompts)} prompts")
    policy = as_policy(gamma)
    check_trees(drafter, sampling)
    if token_budget is not None and token_budget < 1:
        raise SpecdecError(f"token_budget must be >= 1, got {token_budget}")
    b = scorer.rows
    stats = DecodeStats(policy.k_max)
    result = BatchResult([], [], stats, batch=b, joint=np.zeros((policy.k_max + 1,) * 2, dtype=np.int64))
    step = Step(scorer, drafter.slots(b, scorer.cache.capacity), policy, sampling, rule, stats,
                StageClock(scorer.output_device), eos_id)
    queue = iter(_queue(len(prompts), start_at, cycle=token_budget is not None))
    requests: list[Request | None] = [None] * b  # what each slot decodes, None: idle
    spent = [0.0] * b  # decode seconds of each slot's request so far
    passes_before, cpu_start = scorer.forward_passes, time.process_time()

    def refill(slot: int) -> None:
        number, nxt = next(queue, (None, None))
        requests[slot], spent[slot] = None, 0.0
        if nxt is not None:
            generator = None if seed is None else prompt_generators(seed, [number], scorer.output_device)[0]
            requests[slot] = Request(nxt, max_new_tokens, generator)
            step.start(slot, list(prompts[nxt]))

    for slot in range(b):
        refill(slot)
    while any(r is not None for r in requests) and (token_budget is None or stats.new_tokens < token_budget):
        done = step(requests)
        result.iteration_seconds.append(done.seconds)
        result.pass_seconds.append(done.pass_seconds)
        result.draft_seconds.append(done.draft_seconds)
        result.emitted.append(done.emitted)
        for _, k, n in done.outcomes:
            if k >= len(result.joint):  # a tree of more nodes than the policy's k_max
                result.joint = np.pad(result.joint, (0, k + 1 - len(result.joint)))
            result.joint[k, n] += 1
        for slot, request in enumerate(requests):
            if request is None:
                continue
            spent[slot] += done.seconds
            if request.done:
                result.outputs.append((request.number, request.tokens))
                result.tokens.extend(request.tokens)
                result.from_drafter.extend(request.from_drafter)
                result.request_seconds.append(spent[slot])
                refill(slot)
    stats.time_total = stats.time_prefill + sum(result.iteration_seconds)
    stats.cpu_total = time.process_time() - cpu_start
    stats.target_passes = scorer.forward_passes - passes_before
    return result


def _queue(n: int, start: int, cycle: bool):
    """(request number, queue position): start + i and (start + i) mod n, once round or forever."""
    i = 0
    while cycle or i < n:
        yield start + i, (start + i) % n
        i += 1
