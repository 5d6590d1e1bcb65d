"""The heads drafter in the one decode loop, on tiny real Hugging Face models with randomly
initialised heads (exactness does not depend on the heads being any good).

- Greedy: output == the target's own greedy output, for gamma 1..4, fused prefill or not.
- The hidden state the heads draft from is the target's at the last committed token's
  predictor (compared with a fresh pass over the committed sequence).
- Sampling: the joint distribution of the first 4 generated tokens (the first iteration drafts
  nothing, the second drafts 2 with heads 1 and 2) equals the target's exact joint
  (enumerated), Pearson chi-square, N = 4000 runs, significance 1e-3, fixed seed; the
  heads' vocabulary is restricted (q = 0 outside it), which must stay exact.
"""
import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.policy import ConfidenceThreshold
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Verdict
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.heads import HeadsDrafter
from tests.fakes import random_heads
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, sampled_joint, tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(temperature=0.0)


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("fuse", [False, True])
def test_greedy_heads_equal_greedy_target(arch, fuse: bool) -> None:
    target = arch(vocab_size=16, seed=0, sharpness=8.0)
    prompt = [5, 9, 2, 3, 7]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    accepted = 0
    for gamma in (1, 2, 3, 4):
        drafter = HeadsDrafter(random_heads(target, 3, seed=gamma), 16)
        result = speculative_decode(TargetScorer(target), drafter, prompt, 40, gamma, GREEDY, None, fuse_prefill=fuse)
        assert result.tokens == reference, gamma
        assert max(result.stats.proposed_hist[min(gamma, 3) + 1:] or [0]) == 0  # never more than H drafts
        accepted += sum(result.stats.accepted)
    assert accepted > 0  # some drafts were kept, so the verification path was exercised


def test_heads_draft_from_the_last_committed_tokens_hidden_state() -> None:
    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    heads = random_heads(target, 3)
    drafter = HeadsDrafter(heads, 16)
    scorer = TargetScorer(target)
    prompt = [1, 2, 3, 4]
    drafter.start(prompt, scorer.start(prompt, needs=drafter.needs))
    gen = torch.Generator().manual_seed(0)
    for _ in range(6):
        proposal = drafter.propose(3, SamplingConfig(1.0), gen)
        scored = scorer.score(proposal, drafter.needs)
        n_acc = int(torch.randint(0, len(proposal) + 1, (1,), generator=gen))  # any outcome of the rule
        new = proposal.tokens[:n_acc].tolist() + [int(scored.logits[n_acc].argmax())]
        verdict = Verdict(n_acc, torch.tensor(new), n_acc == len(proposal))
        scorer.commit(verdict)
        drafter.commit(verdict, scored)
        committed = scorer.committed
        with torch.inference_mode():
            fresh = target(input_ids=torch.tensor([committed]), output_hidden_states=True)
            relogits = target.get_output_embeddings()(fresh.hidden_states[-1])
        # h under the last committed token y = the state at the position before y
        expected = fresh.hidden_states[-1]  # the fresh pass's lm_head input, all positions
        assert drafter.token == committed[-1]
        torch.testing.assert_close(drafter.hidden, expected[0, len(committed) - 2], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(relogits, fresh.logits)  # it is the lm_head's input
    # nothing hooked: the hidden states reached the drafter as a value
    assert not target.get_output_embeddings()._forward_pre_hooks and not target._forward_pre_hooks


@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(0.8, top_p=0.9)], ids=["t1", "t0.8-topp0.9"])
def test_sampled_heads_output_follows_target_distribution(sampling: SamplingConfig) -> None:
    vocab, n_tokens, runs = 5, 4, 4000
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    heads = random_heads(target, 2, vocab=[0, 2, 3], scale=0.3)  # q = 0 on ids 1 and 4
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    gen = torch.Generator().manual_seed(123)
    scorer, drafter = TargetScorer(target), HeadsDrafter(heads, vocab)
    counts, results = sampled_joint(scorer, drafter, prompt, n_tokens, 2, sampling, gen, runs, vocab)
    accepted = sum(sum(r.stats.accepted) for r in results)
    proposed = sum(k * n for r in results for k, n in enumerate(r.stats.proposed_hist))
    assert proposed >= 2 * runs and accepted > runs * 0.3  # both heads drafted in every run and were often kept
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


def test_confidence_policy_stops_before_an_unsure_head() -> None:
    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    drafter = HeadsDrafter(random_heads(target, 3), 16)
    drafter.start([1, 2, 3, 4], TargetScorer(target).start([1, 2, 3, 4], needs=drafter.needs))
    full = drafter.propose(3, GREEDY, None)
    assert len(full) == 3
    assert len(drafter.propose(3, GREEDY, None, keep_going=ConfidenceThreshold(1.0, 0, 3).keep_going)) == 0


def test_replay_of_the_heads_equals_the_decoder() -> None:
    """Teacher-forced blocks of the heads (their estimator) replay greedy decoding count for
    count: the first block comes from the prefill pass, every later one from the verification."""
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions
    from tests.fakes import decode_stats

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    heads = random_heads(target, 3, scale=0.05)  # near the untrained heads: they predict y again
    samples = generate_continuations(target, [[1, 5, 2, 9, 3], [4, 4, 7, 1, 0], [2, 3, 5, 7, 11]], 30, GREEDY, None)
    drafter = HeadsDrafter(heads, 16)
    scores = score_positions(target, drafter.teacher_forced_scorer(target, 6, None), samples, GREEDY, 16, max_gamma=6)
    for gamma in (1, 2, 3):
        replayed, _ = replay([s.accept() for s in scores], [s.block for s in scores], gamma, 3)
        decoded = decode_stats(target, lambda: drafter, samples, gamma)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached
        assert (decoded.iterations, decoded.drafted) == (replayed.iterations, replayed.drafted)
    assert sum(decoded.accepted) > 0
