"""Draft-length policies (specdec.reference.core.policy) in the one decode loop, on tiny real models.

- The confidence rule stops every chain drafter (draft model, heads, feature draft) before the
  first position whose unadjusted top probability is below tau, as the drafters' own
  min_confidence code did (that code is gone; its rule is written out here as `old_cut`);
  n_min positions are drafted whatever their confidence; keep_last drafts the low one too.
- The heuristic schedule moves the budget as transformers' does (+2 after a fully accepted
  draft, -1 down to 1, per slot, reset per sequence unless persist).
- Exactness under every policy: greedy output == greedy target output (batch-1 and batch loop);
  the joint of the first 3 sampled tokens equals the target's exact joint (Pearson chi-square,
  N = 2000 runs, significance 1e-3, fixed seed).
- The command-line spelling, and a toy rule added by one module and one registry line.
"""
from __future__ import annotations

import pytest
import torch

from specdec.errors import SpecdecError
from specdec.reference.core import policy as policies
from specdec.reference.core.batch_loop import decode_batch
from specdec.reference.model.batch_scorer import BatchScorer
from specdec.reference.core.loop import autoregressive_decode, decode
from specdec.reference.core.policy import (ConfidenceThreshold, FixedGamma, HeuristicSchedule, as_policy,
                                           parse_policy)
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Verdict
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.eagle import EagleDrafter
from specdec.reference.drafters.heads import HeadsDrafter
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from tests.fakes import noisy_copy, random_eagle, random_heads
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, sampled_joint, tiny_llama
from tests.toy_modules import import_toy

GREEDY = SamplingConfig(temperature=0.0)
PROMPT = [5, 9, 2, 33, 7]


def old_cut(confidences: list[float], tau: float) -> int:
    """The drafters' former rule: `if min_confidence > 0 and top < min_confidence: break`."""
    return next((i for i, c in enumerate(confidences) if tau > 0 and c < tau), len(confidences))


def drafters(target):
    """(name, fresh drafter after `start`) for every chain drafter that asks keep_going."""
    scorer = TargetScorer(target)
    little, heads, eagle = noisy_copy(target, 0.5, 1), random_heads(target, 4), random_eagle(target)

    def started(d):
        d.start(PROMPT, scorer.start(PROMPT, needs=d.needs) if d.needs else None)
        return d

    return {"neural": lambda: started(NeuralDrafter(little, 64)), "heads": lambda: started(HeadsDrafter(heads, 64)),
            "eagle": lambda: started(EagleDrafter(eagle, 64))}, little


@torch.inference_mode()
@pytest.mark.parametrize("sampling", [GREEDY, SamplingConfig(1.0)], ids=["t0", "t1"])
def test_confidence_stops_where_min_confidence_did(sampling) -> None:
    target = tiny_llama(vocab_size=64, seed=0, sharpness=8.0)
    makers, little = drafters(target)
    cuts = set()
    for name, make in makers.items():
        seen: list[float] = []
        full = make().propose(4, sampling, torch.Generator().manual_seed(1),
                              keep_going=lambda i, q: seen.append(float(q.max())) or True).tokens.tolist()
        if name == "neural":  # the confidences the drafter shows are its model's own top probabilities
            own = [float(little(input_ids=torch.tensor([PROMPT + full[:i]])).logits[0, -1].softmax(-1).max())
                   for i in range(4)]
            assert seen == pytest.approx(own, abs=1e-5)
        for tau in sorted(set(seen)) + [c + 1e-6 for c in seen] + [0.0, 0.05, 0.5, 1.0]:
            cut = old_cut(seen, tau)
            policy = ConfidenceThreshold(tau, 0, 4)
            kept = make().propose(4, sampling, torch.Generator().manual_seed(1),
                                  keep_going=policy.keep_going if policy.stops_early else None).tokens.tolist()
            assert kept == full[:cut], (name, tau)
            cuts.add(cut)
            if tau > 0:  # the first 2 drafted whatever their confidence; the low token kept (HF's rule)
                for variant, expect in ((ConfidenceThreshold(tau, 2, 4), 2 + old_cut(seen[2:], tau)),
                                        (ConfidenceThreshold(tau, 0, 4, keep_last=True), min(cut + 1, 4))):
                    got = make().propose(4, sampling, torch.Generator().manual_seed(1), keep_going=variant.keep_going)
                    assert got.tokens.tolist() == full[:expect], (name, variant)
    assert len(cuts) >= 4  # the thresholds stopped the drafts at several positions, or let them run


def test_heuristic_schedule_moves_as_transformers() -> None:
    full, short = Verdict(2, torch.tensor([1, 2, 3]), True), Verdict(0, torch.tensor([4]), False)
    h = HeuristicSchedule(initial=3, n_max=8)
    h.start(0)
    seen = []
    for verdict in (full, full, full, short, short, short, short, short, full):
        h.observe(verdict)
        seen.append(h.budget())
    assert seen == [5, 7, 8, 7, 6, 5, 4, 3, 5]
    for _ in range(9):
        h.observe(short)
    assert h.budget() == 1 and h.budget(slot=1) == 3  # never below 1; slots apart
    h.start(0)
    assert h.budget() == 3  # a new sequence starts again (HF's heuristic_transient)
    kept = HeuristicSchedule(initial=3, n_max=8, persist=True)
    kept.start(0), kept.observe(full), kept.start(0)
    assert kept.budget() == 5  # HF's heuristic: the count carries over


@pytest.mark.parametrize("policy", [HeuristicSchedule(1, 6), ConfidenceThreshold(0.5, 1, 5),
                                    ConfidenceThreshold(0.6, 0, 4, keep_last=True), FixedGamma(3)],
                         ids=["heuristic", "confidence", "confidence-keep-last", "fixed"])
def test_greedy_output_is_the_targets_under_every_policy(policy) -> None:
    target = tiny_llama(vocab_size=64, seed=0)
    little = noisy_copy(target, 0.4, 1)
    prompts = [PROMPT, [1, 2, 3, 4, 1, 2], [40, 41, 3]]
    alone = [autoregressive_decode(TargetScorer(target), p, 30, GREEDY, None).tokens for p in prompts]
    for prompt, reference in zip(prompts, alone):
        result = decode(TargetScorer(target), NeuralDrafter(little, 64), prompt, 30, policy, GREEDY, None)
        assert result.tokens == reference
        assert sum(result.stats.accepted) > 0 and len(result.stats.proposed_hist) == policy.k_max + 1
    run = decode_batch(BatchScorer(target, 2, 64), NeuralDrafter(little, 64), prompts, 30, policy, GREEDY, None)
    assert dict(run.outputs) == dict(enumerate(alone))


def test_heuristic_budget_follows_the_verdicts_in_the_loop() -> None:
    """The loop asks the budget before each draft and reports each verdict: the proposals' lengths
    are the schedule replayed over the run's own verdicts."""
    target = tiny_llama(vocab_size=64, seed=0, sharpness=8.0)

    class Recording(NeuralDrafter):
        def propose(self, gamma, sampling, generator, keep_going=None):
            rooms.append(gamma)
            return super().propose(gamma, sampling, generator, keep_going)

        def commit(self, verdict, scored):
            steps.append((verdict.bonus, len(verdict.tokens)))
            super().commit(verdict, scored)

    rooms, steps = [], []
    decode(TargetScorer(target), Recording(noisy_copy(target, 0.3, 1), 64), PROMPT, 60, HeuristicSchedule(2, 9),
           GREEDY, None)
    expected, n, emitted = [], 2, 0
    for bonus, tokens in steps:  # the schedule replayed, capped by the tokens left as the loop caps it
        expected.append(min(n, 60 - emitted - 1))
        n, emitted = (min(n + 2, 9) if bonus else max(1, n - 1)), emitted + tokens
    assert [r for r in expected if r > 0] == rooms
    assert max(rooms) > 2 and 1 in rooms  # it grew and shrank


@pytest.mark.parametrize("policy, floor", [(lambda: HeuristicSchedule(1, 4), 0.3),
                                           (lambda: ConfidenceThreshold(0.3, 0, 3), 0.3),
                                           (lambda: break_even(3, c=0.0), 0.1)],
                         ids=["heuristic", "confidence", "break-even"])
def test_sampled_output_follows_the_target_under_a_policy(policy, floor) -> None:
    policy = policy()  # break_even is defined further down
    vocab, n_tokens, runs = 6, 3, 2000
    sampling = SamplingConfig(1.0)
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    draft = tiny_llama(vocab_size=vocab, seed=1, sharpness=6.0)
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    counts, results = sampled_joint(TargetScorer(target), NeuralDrafter(draft, vocab), prompt, n_tokens, policy,
                                    sampling, torch.Generator().manual_seed(123), runs, vocab)
    assert sum(sum(r.stats.accepted) for r in results) > runs * floor
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


def test_policy_spelling() -> None:
    assert parse_policy("fixed", 4) == FixedGamma(4) == as_policy(4)
    assert parse_policy("confidence:tau=0.4,n_min=1", 6) == ConfidenceThreshold(0.4, 1, 6)
    assert parse_policy("confidence:keep_last=true", 3) == ConfidenceThreshold(0.4, 0, 3, True)
    assert parse_policy(" heuristic:initial=3,persist=1 ", 4) == HeuristicSchedule(3, 64, True)
    assert not ConfidenceThreshold(0.0).stops_early and not FixedGamma(2).stops_early
    for bad, says in (("nope", "unknown draft-length rule 'nope'"), ("confidence:tau=x", "expected a number"),
                      ("confidence:tau", "key=value"), ("confidence:ta=1", "tau, n_min, n_max, keep_last"),
                      ("confidence:tau=1.5", "[0, 1]"), ("confidence:n_min=5,n_max=2", "n_min <= n_max"),
                      ("heuristic:initial=0", "1 <= initial"), ("fixed:gamma=2.5", "whole number"),
                      ("heuristic:persist=maybe", "0 or 1")):
        with pytest.raises(SpecdecError, match=r"^[^\n]*$") as err:
            parse_policy(bad, 4)
        assert says in str(err.value), bad


TOY = '''
from dataclasses import dataclass

from specdec.reference.core.policy import PolicyBase


@dataclass
class Alternate(PolicyBase):
    """gamma drafts, then 1, then gamma, ..."""

    gamma: int = 4
    steps: int = 0

    @property
    def k_max(self) -> int:
        return self.gamma

    def start(self, slot: int = 0) -> None:
        self.steps = 0

    def budget(self, slot: int = 0) -> int:
        return self.gamma if self.steps % 2 == 0 else 1

    def observe(self, verdict, slot: int = 0) -> None:
        self.steps += 1
'''


def test_a_rule_is_one_module_and_one_registry_line(tmp_path, monkeypatch) -> None:
    module = import_toy(tmp_path, "toy_policy", TOY, monkeypatch)
    monkeypatch.setitem(policies.POLICIES, "alternate", module.Alternate)  # the one line
    policy = parse_policy("alternate", 3)
    assert policy == module.Alternate(3)
    target = tiny_llama(vocab_size=64, seed=0, sharpness=8.0)
    prompt = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
    result = decode(TargetScorer(target), PromptLookupDrafter(2), prompt, 30, policy, GREEDY, None)
    assert result.tokens == autoregressive_decode(TargetScorer(target), prompt, 30, GREEDY, None).tokens
    assert result.stats.proposed_hist[2] == 0 and result.stats.proposed_hist[1] > 0  # 3, 1, 3, 1, ...


# The break-even rule (issue 52): exact whatever its law says, and it stops where the rule says.
from specdec.reference.core.break_even import BreakEven  # noqa: E402

EDGES6 = (0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0)


def break_even(n_max: int = 5, c: float = 0.05) -> BreakEven:
    return BreakEven(n_max=n_max, edges=EDGES6, weights=(0.2, 0.2, 0.2, 0.15, 0.15, 0.1),
                     accept=(0.02, 0.15, 0.35, 0.6, 0.85, 0.97), c=c, verify_cost=(1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3))


def test_break_even_keep_going_follows_the_rule() -> None:
    rule = break_even()
    assert rule.rate > 1.0 and rule.stops_early and rule.k_max == 5
    q = lambda top: torch.tensor([top] + [(1.0 - top) / 20] * 20)  # noqa: E731
    assert rule.keep_going(0, q(0.99)) and rule.rho[0] == pytest.approx(0.97)
    assert not rule.keep_going(1, q(0.1))  # rho a(b) = 0.97 * 0.02: below the break-even value
    assert rule.keep_going(0, q(0.99)) and rule.rho[0] == pytest.approx(0.97)  # a new draft starts afresh
    # once rho is low, the next forward is not worth a look (the slot stops) ...
    low = BreakEven(n_max=5, edges=EDGES6, weights=(0.0, 0.0, 0.0, 0.0, 0.0, 1.0), accept=(0, 0, 0, 0, 0.5, 0.5),
                    c=0.3, verify_cost=(1.0, 1.3, 1.6, 1.9, 2.2, 2.5, 2.8))
    assert not low.keep_going(0, q(0.99))  # ... nor the first one, when nothing pays


@pytest.mark.parametrize("n_max", [1, 4])
def test_greedy_output_is_the_targets_under_break_even(n_max) -> None:
    target = tiny_llama(vocab_size=64, seed=0)
    little = noisy_copy(target, 0.4, 1)
    policy = break_even(n_max, c=0.0)
    prompts = [PROMPT, [1, 2, 3, 4, 1, 2], [40, 41, 3]]
    alone = [autoregressive_decode(TargetScorer(target), p, 30, GREEDY, None).tokens for p in prompts]
    for prompt, reference in zip(prompts, alone):
        assert decode(TargetScorer(target), NeuralDrafter(little, 64), prompt, 30, policy, GREEDY, None).tokens == reference
    run = decode_batch(BatchScorer(target, 2, 64), NeuralDrafter(little, 64), prompts, 30, policy, GREEDY, None)
    assert dict(run.outputs) == dict(enumerate(alone))


def test_break_even_spelling_reads_an_estimate(tmp_path) -> None:
    import json

    law = {"edges": list(EDGES6), "positions": [20, 20, 20, 15, 15, 10], "accepted": [0.4, 3, 7, 9, 12.75, 9.7],
           "accepted_sq": [0, 0, 0, 0, 0, 0]}
    path = tmp_path / "estimate.json"
    path.write_text(json.dumps({"confidence_law": law, "cost": {"c": 0.05, "verify_cost": [1, 1.05, 1.1, 1.15]}}))
    rule = parse_policy(f"optimal:estimate={path},n_max=3", 6)
    assert isinstance(rule, BreakEven) and rule.n_max == 3 and rule.c == 0.05 and rule.rate > 1
    for bad, says in (("optimal", "estimate=FILE"), (f"optimal:estimate={tmp_path}/none.json", "not a readable"),
                      ("optimal:edges=1", "n_max")):
        with pytest.raises(SpecdecError, match=r"^[^\n]*$") as err:
            parse_policy(bad, 4)
        assert says in str(err.value), bad
