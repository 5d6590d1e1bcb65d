"""The ragged batch decoder (continuous batching) on tiny real Hugging Face models.

- Greedy: every request's output equals that prompt decoded alone by the batch-1 loop (Llama
  and GPT-2 architectures, padded and packed layouts, B = 1, 3, 4, gamma 0 / 3 / 5, prompt lookup
  and a neural draft model: slots accept different counts in the same pass).
- Sampling: requests decoded in a batch of 4 follow the target: the joint of their first 3
  tokens against the exact joint (enumerated), Pearson chi-square per prompt, 1500 requests
  each, significance 1e-3, fixed seed.
- Per-request generators: every request of a batch of 8 (mixed prompt lengths, temperature 1,
  a neural draft and prompt lookup, fixed gamma and a confidence stop) yields exactly the tokens
  and drafts it yields decoded alone with its own generator (`prompt_generators(seed, [j])`), and
  at temperature 0 the target's own greedy tokens.
- One draft pass per position for all slots: a neural draft's passes per step stay at gamma.
- Continuous batching: with a token budget every pass has every slot busy; the counts add up.
- Token trees: greedy rows equal their prompt decoded alone (and the target's own tokens) with a
  tree drafter whose trees hold the right path, a wrong sibling and a wrong first token (padded
  and packed, Llama and GPT-2, B = 1, 3, 4); at temperature 1 each request of a batch of 8
  yields exactly its tokens decoded alone with its own generator.
"""
import numpy as np
import pytest
import torch

from specdec.errors import SpecdecError
from specdec.reference.core.batch_loop import decode_batch
from specdec.reference.model.batch_scorer import BatchScorer
from specdec.reference.core.loop import autoregressive_decode, decode, speculative_decode
from specdec.reference.core.policy import ConfidenceThreshold
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seeds import prompt_generators
from specdec.reference.core.seams import NOTHING, Proposal
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.tree import trie
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(temperature=0.0)


def _prompts(vocab: int, lengths=(5, 9, 3, 17, 6, 11, 2, 8)) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_greedy_rows_equal_their_prompt_decoded_alone(arch, layout: str) -> None:
    target, draft = arch(vocab_size=64, seed=0, sharpness=8.0), arch(vocab_size=64, seed=1, sharpness=8.0)
    prompts = _prompts(64)
    alone = [autoregressive_decode(TargetScorer(target), p, 20, GREEDY, None).tokens for p in prompts]
    for drafter in (PromptLookupDrafter(2), NeuralDrafter(draft, 64)):
        for gamma in (0, 3, 5):
            for b in (1, 3, 4):
                run = decode_batch(BatchScorer(target, b, 48, layout), drafter, prompts, 20, gamma, GREEDY, None)
                assert sorted(j for j, _ in run.outputs) == list(range(len(prompts)))
                for j, tokens in run.outputs:
                    assert tokens == alone[j], (type(drafter).__name__, gamma, b, j)
                if gamma and arch is tiny_llama:  # ragged slots: different accepted counts (tiny GPT-2 repeats one token)
                    assert np.count_nonzero(run.joint.sum(axis=0)) > 1


def test_eos_ends_a_request_as_it_ends_the_batch_1_decode() -> None:
    target = tiny_llama(vocab_size=64, seed=0, sharpness=8.0)
    prompts = _prompts(64)
    alone = [autoregressive_decode(TargetScorer(target), p, 30, GREEDY, None).tokens for p in prompts]
    eos = alone[0][4]  # a token the first request emits early
    expect = [autoregressive_decode(TargetScorer(target), p, 30, GREEDY, None, eos_id=eos).tokens for p in prompts]
    run = decode_batch(BatchScorer(target, 3, 64), PromptLookupDrafter(2), prompts, 30, 4, GREEDY, None, eos_id=eos)
    assert dict(run.outputs) == dict(enumerate(expect))


def test_sampled_rows_follow_the_target_distribution() -> None:
    vocab, n_tokens, per_prompt = 6, 3, 1500
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    draft = tiny_llama(vocab_size=vocab, seed=1, sharpness=6.0)
    sampling = SamplingConfig(1.0)
    prompts = [[1, 4, 2], [3, 0, 5, 5, 2, 1]]  # different lengths, decoded side by side
    run = decode_batch(BatchScorer(target, 4, 16), NeuralDrafter(draft, vocab), prompts * per_prompt, n_tokens, 2,
                       sampling, 123)
    assert run.stats.kept() > 0.3 * len(run.outputs)  # drafts were accepted often: the test bites
    for which, prompt in enumerate(prompts):
        exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
        counts = np.zeros([vocab] * n_tokens)
        for j, tokens in run.outputs:
            if j % 2 == which:
                counts[tuple(tokens)] += 1
        assert counts.sum() == per_prompt
        assert chi_square_pvalue(counts, exact.numpy()) > 1e-3, prompt


@pytest.mark.parametrize("policy", [3, ConfidenceThreshold(0.03, 0, 3, keep_last=True)], ids=["fixed", "confidence"])
def test_a_request_decodes_alike_alone_and_among_eight(policy) -> None:
    target, draft = tiny_llama(vocab_size=64, seed=0, sharpness=3.0), tiny_llama(vocab_size=64, seed=1, sharpness=3.0)
    prompts = _prompts(64)
    sampled, seed = SamplingConfig(1.0), 11
    for drafter in (NeuralDrafter(draft, 64), PromptLookupDrafter(2)):
        run = decode_batch(BatchScorer(target, 8, 48), drafter, prompts, 20, policy, sampled, seed)
        if isinstance(drafter, NeuralDrafter):  # drafts accepted and rejected: the test bites
            assert run.stats.kept() > 20 and run.stats.rejections() > 20
        alone = {j: speculative_decode(TargetScorer(target), drafter.fork(), prompts[j], 20, 3, sampled,
                                       prompt_generators(seed, [j])[0]) if policy == 3 else
                 decode(TargetScorer(target), drafter.fork(), prompts[j], 20, policy, sampled,
                        prompt_generators(seed, [j])[0]) for j in range(len(prompts))}
        for j, tokens in run.outputs:
            assert tokens == alone[j].tokens, (type(drafter).__name__, j)
        # the same drafts, position by position (a policy's stop is the slot's own)
        assert run.stats.proposed_hist == DecodeStats.total([r.stats for r in alone.values()]).proposed_hist
        greedy = decode_batch(BatchScorer(target, 8, 48), drafter, prompts, 20, policy, GREEDY, seed)
        for j, tokens in greedy.outputs:
            assert tokens == autoregressive_decode(TargetScorer(target), prompts[j], 20, GREEDY, None).tokens


def test_a_neural_draft_runs_one_pass_per_position_for_every_slot() -> None:
    """B = 4 slots, gamma 3: at most 3 draft passes per target pass (plus one per prompt's
    prefill), where drafting slot by slot would run up to 4 x 3."""
    target, draft = tiny_llama(vocab_size=64, seed=0, sharpness=8.0), tiny_llama(vocab_size=64, seed=1, sharpness=8.0)
    calls = []
    hook = draft.get_decoder().register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        run = decode_batch(BatchScorer(target, 4, 48), NeuralDrafter(draft, 64), _prompts(64), 20, 3, GREEDY, None)
    finally:
        hook.remove()
    assert run.stats.drafted > 2 * run.passes  # most passes drafted for several slots
    assert len(calls) <= 3 * run.passes + len(_prompts(64))


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_a_draft_step_runs_the_output_layer_on_each_slots_last_position_only(layout: str) -> None:
    """A draft step that catches slots up on several tokens (after a wholly accepted draft) needs the
    logits after each slot's last one: the output layer sees one row a slot, and the logits equal
    those of the same pass with every fed position's logits computed."""
    draft = tiny_llama(vocab_size=64, seed=1, sharpness=8.0)
    prompts, extra = _prompts(64)[:4], [[], [7, 9], [3], [11, 12, 13]]
    seen: list[int] = []
    hook = draft.get_output_embeddings().register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[0]))
    steps, rows = [], []
    try:
        with torch.inference_mode():
            for last_only in (True, False):
                scorer = BatchScorer(draft, 4, 48, layout)
                for s, p in enumerate(prompts):
                    scorer.start(s, p)
                    scorer.append(s, extra[s])
                seen.clear()
                if last_only:
                    steps.append(scorer.next_logits([0, 1, 2, 3]))
                else:
                    logits, _, _, counts = scorer._feed([0, 1, 2, 3], NOTHING)
                    steps.append(logits[torch.tensor(counts).cumsum(0) - 1])
                rows.append(seen[-1])  # the pass's own call (the first also probes the split once)
    finally:
        hook.remove()
    assert rows == [4, 4 + sum(len(e) for e in extra)]  # one row a slot; the full pass: every fed position
    assert steps[0].shape == (4, 64)
    torch.testing.assert_close(steps[0], steps[1])


def test_token_budget_keeps_every_slot_busy_and_counts_add_up() -> None:
    target = tiny_llama(vocab_size=64, seed=0, sharpness=8.0)
    run = decode_batch(BatchScorer(target, 4, 48), PromptLookupDrafter(2), _prompts(64), 12, 3, GREEDY, None,
                       token_budget=300)
    emitted = np.array(run.emitted)
    assert emitted.shape == (run.passes, 4) and emitted.min() >= 1  # steady state: no idle slot in any pass
    assert 300 <= run.stats.new_tokens == emitted.sum() < 300 + 4 * 4
    assert run.joint.sum() == run.stats.iterations == 4 * run.passes
    latency, tokens = run.token_latencies()
    assert tokens.sum() == run.stats.new_tokens and np.all(latency > 0)
    assert len(run.outputs) >= 300 // 12 - 4 and all(len(t) == 12 for _, t in run.outputs)
    assert run.throughput() == pytest.approx(run.stats.new_tokens / sum(run.iteration_seconds))


def test_refusals() -> None:
    target = tiny_llama(vocab_size=64, seed=0)
    with pytest.raises(SpecdecError, match="does not fit"):
        decode_batch(BatchScorer(target, 2, 8), PromptLookupDrafter(2), [[1] * 10], 4, 2, GREEDY, None)
    with pytest.raises(SpecdecError, match="token_budget"):
        decode_batch(BatchScorer(target, 2, 32), PromptLookupDrafter(2), [[1, 2]], 4, 2, GREEDY, None, token_budget=0)
    with pytest.raises(ValueError, match="layout"):
        BatchScorer(target, 2, 32, "diagonal")


class _TreeOfTruth(DrafterBase):
    """A deterministic tree drafter that asks the target for its greedy continuation of the
    committed text: its tree holds a wrong first token (tried first), the greedy path (its last
    token wrong every other step, so depths of acceptance vary) and a wrong sibling under the
    greedy first token."""

    deterministic, tree, fallback = True, True, False

    def __init__(self, model, vocab: int) -> None:
        self.model, self.vocab = model, vocab
        self.text: list[int] = []
        self.steps = 0

    def start(self, prompt, prefill=None) -> None:
        self.text, self.steps = [int(t) for t in prompt], 0

    @torch.inference_mode()
    def propose(self, gamma, sampling, generator, keep_going=None) -> Proposal:
        text = list(self.text)
        for _ in range(gamma):
            text.append(int(self.model(input_ids=torch.tensor([text])).logits[0, -1].argmax()))
        true, v = text[len(self.text):], self.vocab
        if not true:
            return Proposal.empty()
        path = true[:-1] + [(true[-1] + 1) % v] if self.steps % 2 and len(true) > 1 else true
        tokens, parents = trie([[(true[0] + 2) % v, true[0]], path, [true[0], (true[1 % len(true)] + 3) % v]])
        self.steps += 1
        return Proposal(torch.tensor(tokens), None, parents)

    def commit(self, verdict, scored) -> None:
        self.text.extend(verdict.tokens.tolist())


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_token_trees_in_a_ragged_batch_decode_as_alone(arch, layout: str) -> None:
    target = arch(vocab_size=64, seed=0, sharpness=8.0)
    prompts = _prompts(64)
    alone = [autoregressive_decode(TargetScorer(target), p, 20, GREEDY, None).tokens for p in prompts]
    for b in (1, 3, 4):
        run = decode_batch(BatchScorer(target, b, 64, layout), _TreeOfTruth(target, 64), prompts, 20, 3, GREEDY, None)
        for j, tokens in run.outputs:
            assert tokens == alone[j], (b, j)
        # trees passed and were accepted to every depth (partly: the corrupted last token)
        assert run.stats.verified > run.stats.drafted > 0
        assert all(run.joint[:, n].sum() > 0 for n in (1, 2, 3)), run.joint


def test_a_request_of_token_trees_decodes_alike_alone_and_among_eight() -> None:
    """At temperature 1 the trees are verified by recursive rejection (deterministic drafts): each
    request of the batch draws from its own generator, as alone."""
    target = tiny_llama(vocab_size=64, seed=0, sharpness=8.0)
    prompts = _prompts(64)
    sampled, seed = SamplingConfig(1.0), 5
    run = decode_batch(BatchScorer(target, 8, 64), _TreeOfTruth(target, 64), prompts, 20, 3, sampled, seed)
    assert run.stats.kept() > 5  # drafts were accepted: the test bites
    for j, tokens in run.outputs:
        alone = speculative_decode(TargetScorer(target), _TreeOfTruth(target, 64), prompts[j], 20, 3, sampled,
                                   prompt_generators(seed, [j])[0])
        assert tokens == alone.tokens, j
