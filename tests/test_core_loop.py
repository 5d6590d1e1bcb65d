"""The speculative decoder on tiny real Hugging Face models (Llama and GPT-2 architectures).

- Greedy: speculative output == our autoregressive output == HF `generate` greedy output.
- Sampling: the joint distribution of the first 3 generated tokens equals the target's
  exact joint (enumerated), Pearson chi-square, N = 3000 runs, significance 1e-3, fixed seed.
- Seeded runs repeat exactly; KV-cache cropping gives the same logits as re-encoding.
"""
import numpy as np
import pytest
import torch

from specdec.reference.core.seams import NO_PASS, Verdict
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.model.kv_session import KVSession
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, sampled_joint, tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(temperature=0.0)


def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_greedy_speculative_equals_greedy_target(arch, gamma: int) -> None:
    target, draft = arch(vocab_size=64, seed=0, sharpness=8.0), arch(vocab_size=64, seed=1, sharpness=8.0)
    prompt = [5, 9, 2, 33, 7]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    assert reference == hf_greedy(target, prompt, 40)
    for drafter in (NeuralDrafter(draft, 64), NeuralDrafter(target, 64), PromptLookupDrafter(3)):
        result = speculative_decode(TargetScorer(target), drafter, prompt, 40, gamma, GREEDY, None)
        assert result.tokens == reference, type(drafter).__name__
        assert result.stats.new_tokens == 40


def test_self_drafting_accepts_everything() -> None:
    target = tiny_llama(vocab_size=64, seed=0)
    result = speculative_decode(TargetScorer(target), NeuralDrafter(target, 64), [1, 2, 3], 31, 5, GREEDY, None)
    s = result.stats
    assert s.alpha() == 1.0 and s.accepted_hist[-1] == s.iterations - 1  # last one is budget-capped
    assert s.iterations == 6  # 5 iterations of 6 tokens, then 1


@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(1.0, top_k=3),
                                      SamplingConfig(0.8, top_p=0.7), SamplingConfig(1.0, top_k=5, top_p=0.9, min_p=0.2)],
                         ids=["t1", "topk3", "t0.8-topp0.7", "llama-server-chain"])
def test_sampled_output_follows_target_distribution(sampling: SamplingConfig) -> None:
    vocab, n_tokens, runs = 6, 3, 3000
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    draft = tiny_llama(vocab_size=vocab, seed=1, sharpness=6.0)
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    gen = torch.Generator().manual_seed(123)
    scorer, drafter = TargetScorer(target), NeuralDrafter(draft, vocab)
    counts, results = sampled_joint(scorer, drafter, prompt, n_tokens, 2, sampling, gen, runs, vocab)
    accepted = sum(sum(r.stats.accepted) for r in results)
    assert accepted > runs * 0.3  # the drafts really were accepted often, so the test bites
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


def test_seeded_runs_repeat_exactly() -> None:
    target, draft = tiny_llama(vocab_size=64, seed=0, sharpness=3.0), tiny_llama(vocab_size=64, seed=1, sharpness=3.0)
    sampling = SamplingConfig(1.0)
    runs = [speculative_decode(TargetScorer(target), NeuralDrafter(draft, 64), [3, 1, 4], 30, 4, sampling,
                               torch.Generator().manual_seed(7)) for _ in range(2)]
    assert runs[0].tokens == runs[1].tokens
    assert runs[0].stats.accepted_hist == runs[1].stats.accepted_hist


def test_kv_crop_matches_reencoding() -> None:
    model = tiny_llama(vocab_size=64, seed=0)
    session = KVSession(model)
    session.start([1, 2, 3, 4])
    session.extend([5, 6, 7], n_logits=4)
    session.truncate(5)  # keep 1 2 3 4 5; 6, 7 rejected
    cropped = session.extend([9], n_logits=1).logits
    fresh = KVSession(model)
    fresh.start([1, 2, 3, 4, 5, 9])
    reencoded = fresh.extend([], n_logits=1).logits
    torch.testing.assert_close(cropped[-1], reencoded[-1], rtol=1e-4, atol=1e-4)
    assert session.cache.get_seq_length() == 6


def test_rewind_returns_to_the_context_as_start_left_it() -> None:
    """After a pass and a commit, rewinding to the prompt's length gives the next pass the
    logits a fresh session gives (the cache cropped, the prompt's last token pending again)."""
    model = tiny_llama(vocab_size=64, seed=0)
    session = KVSession(model)
    session.start([1, 2, 3, 4])
    session.extend([5, 6, 7], n_logits=4)
    session.commit(Verdict(1, torch.tensor([5, 9]), False))  # 5 accepted, 9 pending
    session.rewind(4)
    assert session.tokens == [1, 2, 3, 4] and session.committed == 4 and session.n_cached == 3
    rewound = session.extend([8], n_logits=2).logits
    fresh = KVSession(model)
    fresh.start([1, 2, 3, 4])
    torch.testing.assert_close(rewound, fresh.extend([8], n_logits=2).logits, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        session.rewind(6)


def test_vocab_padding_is_fitted() -> None:
    """A draft with fewer output rows than the target: q gets zero mass on the extra rows."""
    target, draft = tiny_llama(vocab_size=64, seed=0), tiny_llama(vocab_size=60, seed=1)
    drafter = NeuralDrafter(draft, vocab_size=64)
    drafter.start([1, 2, 3])
    proposal = drafter.propose(3, SamplingConfig(1.0), torch.Generator().manual_seed(0))
    assert proposal.q.shape == (3, 64) and float(proposal.q[:, 60:].sum()) == 0.0
    greedy = speculative_decode(TargetScorer(target), NeuralDrafter(draft, 64), [1, 2, 3], 20, 3, GREEDY, None)
    assert greedy.tokens == autoregressive_decode(TargetScorer(target), [1, 2, 3], 20, GREEDY, None).tokens


def test_prompt_lookup_copies_latest_match() -> None:
    d = PromptLookupDrafter(max_ngram=2)
    d.start([1, 2, 3, 4, 1, 2, 5, 6, 7, 1, 2])
    assert d.propose(3, GREEDY, None).tokens.tolist() == [5, 6, 7]
    d.commit(Verdict(0, torch.tensor([9]), False), NO_PASS)
    assert d.propose(3, GREEDY, None).tokens.tolist() == []  # "2 9" / "9" never seen before


def test_prompt_lookup_earliest_is_hf_prompt_lookup() -> None:
    """`match="earliest"` with n-grams of at most 2 tokens proposes exactly what Hugging Face's
    PromptLookupCandidateGenerator proposes, token for token, on 300 random contexts over a
    small vocabulary (so that matches of every length are frequent), as tokens arrive."""
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    rng = np.random.default_rng(0)
    for gamma in (1, 4):
        hf = PromptLookupCandidateGenerator(num_output_tokens=gamma, max_matching_ngram_size=2, max_length=10**6)
        for _ in range(150):
            seq = rng.integers(0, 6, size=int(rng.integers(2, 40))).tolist()
            ours = PromptLookupDrafter(2, match="earliest")
            ours.start(seq[:2])
            for end in range(2, len(seq) + 1):
                if end > 2:
                    ours.commit(Verdict(0, torch.tensor([seq[end - 1]]), False), NO_PASS)
                ids = torch.tensor([seq[:end]])
                expected = hf.get_candidates(ids)[0][0, end:].tolist()
                assert ours.propose(gamma, GREEDY, None).tokens.tolist() == expected, (seq[:end], gamma)
    d = PromptLookupDrafter(2, match="earliest")
    d.start([1, 2, 3, 4, 1, 2, 5, 6, 7, 1, 2])
    assert d.propose(3, GREEDY, None).tokens.tolist() == [3, 4, 1]  # the first "1 2", not the latest
    with pytest.raises(ValueError, match="match"):
        PromptLookupDrafter(2, match="longest")


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
def test_fused_prefill_matches_hf_pass_for_pass(arch) -> None:
    """fuse_prefill=True encodes the prompt in the first iteration's pass. Greedy output is
    unchanged, and the target's forward passes equal those of HF's own `generate`, both plain
    and with prompt lookup (our lookup:2:earliest = HF's proposals), counted with a hook."""
    target = arch(vocab_size=16, seed=0, sharpness=4.0)  # few ids: the text repeats, lookup pays
    calls = []
    target.register_forward_hook(lambda *_: calls.append(1))

    def hf(prompt, n, lookup):
        calls.clear()
        kwargs = {"prompt_lookup_num_tokens": lookup} if lookup else {}
        out = target.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                              eos_token_id=None, pad_token_id=0, **kwargs)
        return out[0, len(prompt):].tolist(), len(calls)

    for prompt in ([5, 9, 2, 13, 7, 5, 9], [1, 2, 3, 1, 2, 3, 1, 2], [4, 4, 11, 6, 8]):
        n = 30
        expected, hf_passes = hf(prompt, n, None)
        for fuse in (False, True):
            ours = autoregressive_decode(TargetScorer(target), prompt, n, GREEDY, None, fuse_prefill=fuse)
            assert ours.tokens == expected
            assert ours.stats.target_passes == n + (0 if fuse else 1)
        assert hf_passes == n
        expected_lookup, hf_passes = hf(prompt, n, 4)
        assert expected_lookup == expected
        ours = speculative_decode(TargetScorer(target), PromptLookupDrafter(2, match="earliest"), prompt, n, 4,
                                  GREEDY, None, fuse_prefill=True)
        assert ours.tokens == expected
        assert ours.stats.target_passes == hf_passes < n, (ours.stats.target_passes, hf_passes)
