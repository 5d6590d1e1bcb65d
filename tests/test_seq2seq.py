"""Encoder-decoder pairs (T5, BART, Whisper architectures, tiny and random) through the one decoder.

- Greedy: speculative output == our autoregressive output == Hugging Face `generate`, for a
  draft model, the target drafting for itself (every draft accepted: the cache is right) and
  prompt lookup over the source.
- Sampling: the joint distribution of the first 3 decoder tokens (vocabulary 5) equals the target's exact
  joint (enumerated), Pearson chi-square, N = 1200 runs, significance 1e-3, fixed seed.
"""
import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import sampled_joint
from specdec.reference.core.prompt import TokenPrompt
from tests.tiny_seq2seq import ARCHS, exact_joint_seq2seq, hf_generate, prompt_for

GREEDY = SamplingConfig(temperature=0.0)


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("gamma", [1, 4])
def test_greedy_speculative_equals_hf_generate(arch: str, gamma: int) -> None:
    target, draft = ARCHS[arch](vocab_size=32, seed=0), ARCHS[arch](vocab_size=32, seed=1)
    for seed in range(3):
        prompt = prompt_for(target, seed)
        reference = autoregressive_decode(TargetScorer(target), prompt, 20, GREEDY, None).tokens
        assert reference == hf_generate(target, prompt, 20)
        for drafter in (NeuralDrafter(draft, 32), NeuralDrafter(target, 32), PromptLookupDrafter(2)):
            result = speculative_decode(TargetScorer(target), drafter, prompt, 20, gamma, GREEDY, None)
            assert result.tokens == reference, (type(drafter).__name__, seed)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_self_drafting_accepts_everything(arch: str) -> None:
    target = ARCHS[arch](vocab_size=32, seed=0)
    result = speculative_decode(TargetScorer(target), NeuralDrafter(target, 32), prompt_for(target), 31, 5, GREEDY,
                                None)
    assert result.stats.alpha() == 1.0 and result.stats.iterations == 6


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_sampled_output_follows_target_distribution(arch: str) -> None:
    vocab, n_tokens, runs = 5, 3, 1200
    target = ARCHS[arch](vocab_size=vocab, seed=0, sharpness=1.0)
    draft = ARCHS[arch](vocab_size=vocab, seed=0, sharpness=1.0)  # the target with a perturbed output layer
    with torch.no_grad():
        draft.get_output_embeddings().weight.add_(torch.randn(vocab, 32, generator=torch.Generator().manual_seed(9)))
    sampling = SamplingConfig(1.0)
    prompt = prompt_for(target, 3)
    exact = exact_joint_seq2seq(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    counts, results = sampled_joint(TargetScorer(target), NeuralDrafter(draft, vocab), prompt, n_tokens, 2, sampling,
                                    torch.Generator().manual_seed(123), runs, vocab)
    assert sum(sum(r.stats.accepted) for r in results) > runs * 0.3  # drafts were accepted often: the test bites
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


def _perturbed(arch: str, vocab: int, seed: int = 9):
    """The target (seed 0) with a noisy output layer: close enough for runs of acceptances."""
    draft = ARCHS[arch](vocab_size=vocab, seed=0)
    with torch.no_grad():
        draft.get_output_embeddings().weight.add_(0.3 * torch.randn(vocab, 32, generator=torch.Generator().manual_seed(seed)))
    return draft


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("kind", ["neural", "lookup"])
def test_estimator_replay_equals_decoder(arch: str, kind: str) -> None:
    """Batched sampling of the target's continuations (sources of different lengths padded in
    the encoder) equals decoding them one by one, and the teacher-forced replay's counts equal
    the speculative decoder's, gamma 1, 3, 5."""
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions
    from tests.fakes import decode_stats

    vocab = 32
    target, draft = ARCHS[arch](vocab_size=vocab, seed=0), _perturbed(arch, vocab)
    prompts = [prompt_for(target, seed) for seed in range(4)]
    if arch != "whisper":  # sources of different lengths
        prompts = [TokenPrompt(p, {"input_ids": p.source["input_ids"][:5 + i]}) for i, p in enumerate(prompts)]
    samples = generate_continuations(target, prompts, 16, GREEDY, None, batch_size=4)
    for prompt, cont in zip(prompts, samples.continuations):
        assert cont == autoregressive_decode(TargetScorer(target), prompt, 16, GREEDY, None).tokens
    make = (lambda: NeuralDrafter(draft, vocab)) if kind == "neural" else (lambda: PromptLookupDrafter(2))
    scores = score_positions(target, make().teacher_forced_scorer(target, 6, None), samples, GREEDY, vocab,
                             max_gamma=6)
    for gamma in (1, 3, 5):
        replayed, _ = replay([s.accept() for s in scores], [s.block for s in scores], gamma, 6)
        decoded = decode_stats(target, make, samples, gamma)
        assert replayed.accepted_hist == decoded.accepted_hist
        assert (replayed.reached, replayed.accepted, replayed.drafted) == \
            (decoded.reached, decoded.accepted, decoded.drafted)
    if kind == "neural":
        assert sum(decoded.accepted) > 0  # the comparison bites


@pytest.mark.parametrize("arch", ["t5", "whisper"])
def test_timing_and_draft_steps_run_on_the_decoder(arch: str) -> None:
    from specdec.reference.estimate.cost import estimate_cost

    target, draft = ARCHS[arch](vocab_size=32, seed=0), _perturbed("t5" if arch == "t5" else arch, 32)
    tokens = prompt_for(target) + list(range(2, 20))
    cost, timings = estimate_cost(target, NeuralDrafter(draft, 32), tokens, GREEDY, 8, max_k=4, repeats=2,
                                  other_contexts=(4,))
    assert [t.context_tokens for t in timings] == [4, 8]
    assert all(s > 0 for t in timings for s in t.seconds) and cost.c > 0
