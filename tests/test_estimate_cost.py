"""The cost estimator: v(k) is a ratio with v(1) = 1, the KV cache is restored, the draft and
step-overhead timings run through the real protocol / decode step, c_hat is counted right."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from specdec.reference.model.models import flops_per_token
from specdec.reference.estimate.cost import c_hat_for, estimate_cost
from specdec.reference.estimate.timing import (context_of, time_contexts, time_draft_steps, time_step_overhead,
                                               time_target_passes)
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.core.sampling import SamplingConfig
from tests.fakes import TINY_VOCAB, random_prompts
from tests.tiny_models import tiny_gpt2, tiny_llama

TOKENS = random_prompts(1, 40)[0]



def test_context_of_repeats_short_token_lists() -> None:
    assert context_of([1, 2, 3], 7) == [1, 2, 3, 1, 2, 3, 1]
    with pytest.raises(ValueError):
        context_of([], 3)


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
def test_verify_cost_curve_is_relative_to_one_token(arch) -> None:
    model = arch(vocab_size=TINY_VOCAB, seed=0)
    timing = time_target_passes(model, TOKENS, context_tokens=20, max_k=6, repeats=3, warmup=1)
    assert len(timing.seconds) == len(timing.verify_cost) == 6
    assert timing.verify_cost[0] == 1.0 and all(v > 0 for v in timing.verify_cost)
    assert timing.step_seconds > 0 and timing.crop_seconds >= 0


def test_verify_passes_are_timed_through_the_decode_step(monkeypatch) -> None:
    """Every timed pass is the decode step's: the target's KV session at the context length
    (rewound after each pass), fed the pending token and k - 1 drafts, the rejected ones cropped;
    t(1) right after an untimed one-token pass (as a probe's), not after the longest pass."""
    from specdec.reference.core.step import Step
    from specdec.reference.model.target import TargetScorer

    fed, steps = [], []
    score, call = TargetScorer.score, Step.__call__

    def record_score(self, proposal, needs=None, **kw):
        fed.append((self.session.n_cached, len(proposal) + 1))
        return score(self, proposal, **({} if needs is None else {"needs": needs}))

    def record_step(self, requests):
        steps.append(len(requests))
        return call(self, requests)

    monkeypatch.setattr(TargetScorer, "score", record_score)
    monkeypatch.setattr(Step, "__call__", record_step)
    timings = time_contexts(tiny_llama(TINY_VOCAB, seed=0), TOKENS, [8, 20], max_k=4, repeats=2, warmup=1)
    assert steps == [1] * (3 * 2 * 5)
    assert fed == [(n - 1, k) for _ in range(3) for n in (8, 20) for k in (1, 1, 2, 3, 4)]
    assert [t.context_tokens for t in timings] == [8, 20]
    assert all(len(t.runs[0]) == len(t.runs[3]) == 2 for t in timings)


def test_draft_timing_through_the_protocol() -> None:
    target, draft = tiny_llama(TINY_VOCAB, seed=0), tiny_llama(TINY_VOCAB, seed=1)
    neural = time_draft_steps(NeuralDrafter(draft, TINY_VOCAB), target, TOKENS, SamplingConfig(1.0), context_tokens=10,
                              gamma=3, repeats=4, warmup=1, generator=torch.Generator().manual_seed(0))
    assert neural.mean_proposed == 3 and neural.token_seconds > 0
    lookup = time_draft_steps(PromptLookupDrafter(2), target, TOKENS, SamplingConfig(0.0), context_tokens=10, gamma=3,
                              repeats=4, warmup=1)
    assert lookup.token_seconds >= 0 and 0 <= lookup.mean_proposed <= 3


def test_a_model_drafting_for_itself_costs_about_one_target_step() -> None:
    """c is each drafting cycle against the target pass timed beside it (paired, so the machine's
    drift cancels): the target as its own draft makes one pass per drafted token, c ~ 1."""
    target = tiny_llama(TINY_VOCAB, seed=0, hidden=256)
    timing = time_draft_steps(NeuralDrafter(target, TINY_VOCAB), target, TOKENS, SamplingConfig(0.0),
                              context_tokens=24, gamma=4, repeats=12, warmup=2)
    assert timing.target_seconds > 0 and timing.mean_proposed == 4
    assert 0.6 < timing.c < 2.0, timing


def test_what_a_cycle_costs_the_target_next_pass_is_in_c() -> None:
    """A draft model's passes evict the target's weights and slow the target's next pass; that time
    is the drafter's. A drafter whose every cycle stalls the target's next pass by 20 ms: next_pass
    must show the stall (and c carry it, per drafted token); without the stall, nothing near it. The
    bounds are half and a quarter of the stall: next_pass is a median of ratios to each moment's
    clean pass, and on a loaded host a tiny model's pass moves by milliseconds (10 ms read 6.2)."""
    target, draft = tiny_llama(TINY_VOCAB, seed=0), tiny_llama(TINY_VOCAB, seed=1)
    armed, STALL = [False], 0.02

    class Evicting(NeuralDrafter):
        def propose(self, *args, **kwargs):
            armed[0] = True
            return super().propose(*args, **kwargs)

    def stall(module, args) -> None:
        if armed[0]:
            armed[0] = False
            time.sleep(STALL)

    def timing(drafter):
        return time_draft_steps(drafter, target, TOKENS, SamplingConfig(0.0), context_tokens=10, gamma=2, repeats=8,
                                warmup=1)

    plain = timing(NeuralDrafter(draft, TINY_VOCAB))
    hook = target.register_forward_pre_hook(stall)
    try:
        slow = timing(Evicting(draft, TINY_VOCAB))
    finally:
        hook.remove()
    assert slow.mean_proposed == plain.mean_proposed == 2
    assert slow.next_pass * slow.target_seconds > STALL / 2, slow
    assert abs(plain.next_pass * plain.target_seconds) < STALL / 4, plain
    assert (slow.c - plain.c) * slow.target_seconds * 2 > STALL / 2, (slow, plain)


def test_next_pass_pairs_each_cycle_with_the_passes_after_it(monkeypatch) -> None:
    """Scripted probe times: before cycle j the clean pass takes 10 ms x (1 + 0.1 j) (the machine's
    drift) and the pass before it, right after cycle j - 1, (1 + f_(j-1)) times that. next_pass must
    be the median of f exactly (each loss over the clean pass of its own moment), and c the cycles'
    own c plus that share over the drafted tokens."""
    from specdec.reference.estimate import timing

    warmup, repeats = 1, 5
    f = [0.02, 0.05, 0.01, 0.08, 0.03]  # what timed cycle j costs the next pass
    script = []
    for i in range(warmup + repeats + 1):
        clean = 0.010 * (1 + 0.1 * i)
        script += [clean * (1 + (f[i - warmup - 1] if i > warmup else 0.5)), clean]
    calls = iter(script)
    monkeypatch.setattr(timing.TargetProbe, "__call__", lambda self: next(calls))
    target, draft = tiny_llama(TINY_VOCAB, seed=0), tiny_llama(TINY_VOCAB, seed=1)
    got = time_draft_steps(NeuralDrafter(draft, TINY_VOCAB), target, TOKENS, SamplingConfig(0.0), context_tokens=10,
                           gamma=2, repeats=repeats, warmup=warmup)
    assert next(calls, None) is None  # two probes before each cycle and after the last
    assert got.next_pass == pytest.approx(float(np.median(f)))
    assert got.c == pytest.approx(got.cycle_c + float(np.median(f)) / 2)
    assert got.target_seconds == pytest.approx(float(np.median([0.010 * (1 + 0.1 * i) for i in range(1, 6)])))


@pytest.mark.parametrize("sampling", [SamplingConfig(0.0), SamplingConfig(1.0)], ids=["greedy", "t1"])
def test_the_step_overhead_is_timed_through_the_real_step(sampling: SamplingConfig) -> None:
    """One real target pass per timed step (and per warm-up step), beside the context's prefill and
    the one pass that gives the drafts their rows: every o(k) comes from steps of the real target."""
    target = tiny_llama(TINY_VOCAB, seed=0)
    calls = [0]
    hook = target.register_forward_pre_hook(lambda module, args: calls.__setitem__(0, calls[0] + 1))
    try:
        overhead = time_step_overhead(target, TOKENS, 12, sampling, 4, repeats=3, warmup=1,
                                      generator=torch.Generator().manual_seed(0)).seconds
    finally:
        hook.remove()
    assert calls[0] == (1 + 3) * 4 + 2
    assert len(overhead) == 4 and all(np.isfinite(overhead))
    for bad in (dict(context_tokens=0, max_k=4), dict(context_tokens=12, max_k=0), dict(context_tokens=12, max_k=4,
                                                                                         repeats=0)):
        with pytest.raises(ValueError):
            time_step_overhead(target, TOKENS, sampling=sampling, **bad)


def test_the_step_overhead_counts_the_slow_passes_a_median_leaves_out() -> None:
    """A decode's time is the sum of its passes (their mean); v(k) is a ratio of medians. A pass
    that stalls 20 ms once in four calls leaves every median where it was, so o(k) must carry the
    stalls: about 20 ms x 3 k's / 4 per repeat over the three k's together."""
    target = tiny_llama(TINY_VOCAB, seed=0)
    calls = [0]

    def stall(module, args) -> None:
        calls[0] += 1
        if calls[0] % 4 == 0:
            time.sleep(0.02)

    def parts() -> tuple[float, float]:
        o = time_step_overhead(target, TOKENS, 12, SamplingConfig(0.0), 3, repeats=12, warmup=1)
        return sum(o.tail), sum(o.after_pass)

    plain = min(parts() for _ in range(3))  # a loaded machine's stray delay would land in one run
    hook = target.register_forward_pre_hook(stall)
    try:
        stalled = parts()
    finally:
        hook.remove()
    assert stalled[0] - plain[0] > 0.010, (plain, stalled)  # the stalls are the passes' tail
    assert stalled[1] - plain[1] < 0.005, (plain, stalled)  # not the time after the pass


def test_c_hat_counts() -> None:
    target = tiny_llama(TINY_VOCAB, seed=0)
    assert c_hat_for(NeuralDrafter(target, TINY_VOCAB), target) == 1.0
    assert c_hat_for(PromptLookupDrafter(3), target) == 0.0
    # Llama untied: every non-embedding parameter + lm_head counts, input embeddings do not
    expected = 2 * (sum(p.numel() for p in target.parameters()) - target.model.embed_tokens.weight.numel())
    assert flops_per_token(target) == expected
    # GPT-2 ties lm_head to wte: the head is counted once, position embeddings not at all
    gpt = tiny_gpt2(TINY_VOCAB)
    emb = gpt.transformer.wte.weight.numel() + gpt.transformer.wpe.weight.numel()
    assert flops_per_token(gpt) == 2 * (sum(p.numel() for p in gpt.parameters()) - emb + gpt.lm_head.weight.numel())


def test_estimate_cost_end_to_end() -> None:
    target, draft = tiny_llama(TINY_VOCAB, seed=0), tiny_llama(TINY_VOCAB, seed=1)
    cost, timings = estimate_cost(target, NeuralDrafter(draft, TINY_VOCAB), TOKENS, SamplingConfig(1.0),
                                  context_tokens=16, max_k=5, repeats=2, draft_gamma=2, draft_repeats=3,
                                  generator=torch.Generator().manual_seed(0), other_contexts=(40, 4, 16))
    d = cost.to_dict()
    assert d["c"] > 0 and d["c_hat"] == pytest.approx(1.0) and len(d["verify_cost"]) == 5
    assert len(d["overhead"]) == 5 and np.isfinite(d["overhead"]).all()
    # the other contexts are timed with it, in increasing length, the cost's own timing among them
    assert [t.context_tokens for t in timings] == [4, 16, 40] and timings[1] is cost.target
    assert all(len(t.seconds) == 5 and len(t.runs[0]) == 2 for t in timings)


def test_pooled_timings_use_every_run() -> None:
    from specdec.reference.estimate.timing import pool_timings

    model = tiny_llama(TINY_VOCAB, seed=0)
    long = time_target_passes(model, TOKENS, context_tokens=12, max_k=5, repeats=3, warmup=0)
    short = time_target_passes(model, TOKENS, context_tokens=12, max_k=2, repeats=2, warmup=0)
    pooled = pool_timings([long, short])
    assert [len(r) for r in pooled.runs] == [5, 5, 3, 3, 3]
    assert pooled.seconds[0] == float(np.median(long.runs[0] + short.runs[0]))
    # k = 5 only from the long sweep's runs (a median below t(1) is raised to t(1): timer noise)
    assert pooled.verify_cost[0] == 1.0
    assert pooled.seconds[4] == max(float(np.median(long.runs[4])), pooled.seconds[0])
    with pytest.raises(ValueError):
        pool_timings([])


def test_cache_evictor_streams_what_a_target_pass_streams(monkeypatch) -> None:
    """The evictor writes as many bytes as the target's pass streams, capped at twice the last-level
    cache; with the fast backend a layer's packed copy counts in place of its weights (the pass
    reads the copy; the MLP's gate and up in one), so both backends of a model whose widths fill
    whole packing units (192: 4 x 16 and 6 x 8 columns) stream exactly the same bytes, and a
    model with narrower layers only more (the padding)."""
    from specdec.reference.model.backend import available, use_backend
    from specdec.reference.estimate import timing

    eager = tiny_llama(seed=0)
    params = sum(p.numel() * p.element_size() for p in eager.parameters())
    assert timing.model_bytes(eager) >= params
    if available(eager) is None:
        fast = tiny_llama(seed=0)
        use_backend(fast, "fast")
        assert timing.model_bytes(fast) >= timing.model_bytes(eager)
        shapes = dict(vocab_size=192, hidden=192, heads=3, kv_heads=3)
        eager, fast = tiny_llama(**shapes), tiny_llama(**shapes)
        use_backend(fast, "fast")
        assert timing.model_bytes(fast) == timing.model_bytes(eager)
    monkeypatch.setattr(timing, "last_level_cache_bytes", lambda: 1 << 20)
    assert timing.CacheEvictor(torch.device("cpu"), 4096).buffer.numel() * 4 == 4096
    assert timing.CacheEvictor(torch.device("cpu"), 1 << 30).buffer.numel() * 4 == 2 << 20
    assert timing.CacheEvictor(torch.device("cpu")).buffer.numel() * 4 == 2 << 20


def test_a_k_token_pass_is_never_timed_below_the_one_token_pass() -> None:
    """A tiny model's passes take microseconds: a median t(k) below t(1) is the timer's noise and is
    raised to t(1) (the plan refuses v(k) < 1), the raw runs kept as measured."""
    from specdec.reference.estimate.timing import _timing_from_runs

    runs = [[1.0e-4, 1.2e-4, 1.1e-4], [0.9e-4, 0.8e-4, 1.0e-4], [2.0e-4, 2.2e-4, 2.1e-4]]
    timing = _timing_from_runs(20, runs, 0.0, 3, 1, "cpu")
    assert timing.seconds == pytest.approx([1.1e-4, 1.1e-4, 2.1e-4])
    assert timing.verify_cost == pytest.approx([1.0, 1.0, 2.1 / 1.1]) and timing.runs == runs
