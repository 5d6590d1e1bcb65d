"""The feature drafter (EAGLE) on tiny real Hugging Face models with random draft weights
(exactness does not depend on the draft being any good).

- Greedy, chains and dynamic trees: output == the target's own greedy output, fused prefill
  or not, Llama and GPT-2 targets.
- The draft's incremental cache (drafting one token at a time, after commits) computes what
  the unrolled pass computes (the estimator's and the training-time test's): the estimator's
  blocks replay greedy decoding count for count.
- Sampling: the joint distribution of the first 4 tokens equals the target's exact joint
  (enumerated), Pearson chi-square, significance 1e-3, fixed seeds: chains (q sampled from a
  restricted vocabulary) and deterministic top-k trees (recursive rejection over siblings).
"""
import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.target import TargetScorer
from specdec.reference.drafters.eagle import EagleDrafter
from tests.fakes import decode_stats, random_eagle, trained_eagle
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, sampled_joint, tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(temperature=0.0)


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("tree", [None, (2, 6)], ids=["chain", "tree"])
def test_greedy_eagle_equals_greedy_target(arch, fuse: bool, tree) -> None:
    target = arch(vocab_size=16, seed=0, sharpness=8.0)
    prompt = [5, 9, 2, 3, 7]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    accepted, draft = 0, trained_eagle(target)
    for gamma in (1, 2, 4):
        drafter = EagleDrafter(draft, 16, tree)
        result = speculative_decode(TargetScorer(target), drafter, prompt, 40, gamma, GREEDY, None, fuse_prefill=fuse)
        assert result.tokens == reference, gamma
        accepted += sum(result.stats.accepted)
    assert accepted > 0  # drafts were kept: the verification and commit paths ran


def test_tree_is_the_best_candidates_under_the_node_budget() -> None:
    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    drafter = EagleDrafter(random_eagle(target, seed=3), 16, tree=(3, 7))
    prompt = [1, 2, 3, 4, 5]
    drafter.start(prompt, TargetScorer(target).start(prompt, needs=drafter.needs))
    proposal = drafter.propose(4, GREEDY, None)
    assert len(proposal) == 7 and proposal.q is None and 1 < proposal.depth() <= 4
    assert all(p < i for i, p in enumerate(proposal.parents))  # parents first: a valid tree
    chain = EagleDrafter(drafter.draft, 16)
    chain.start(prompt, TargetScorer(target).start(prompt, needs=chain.needs))
    first = int(chain.propose(1, GREEDY, None).tokens[0])
    assert first in [int(t) for t, p in zip(proposal.tokens, proposal.parents) if p < 0]  # the draft's argmax is a root child


def test_replay_of_the_feature_draft_equals_the_decoder() -> None:
    """The estimator's unrolled blocks (one pass per sequence, own tokens, diagonal masks) are
    the drafter's incremental chains: greedy decoding replays count for count."""
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = trained_eagle(target)
    samples = generate_continuations(target, [[1, 5, 2, 9, 3], [4, 4, 7, 1, 0], [2, 3, 5, 7, 11]], 30, GREEDY, None)
    drafter = EagleDrafter(draft, 16)
    scores = score_positions(target, drafter.teacher_forced_scorer(target, 6, None), samples, GREEDY, 16, max_gamma=6)
    for gamma in (1, 2, 4, 6):
        replayed, _ = replay([s.match for s in scores], [s.block for s in scores], gamma, 6)
        decoded = decode_stats(target, lambda: EagleDrafter(draft, 16), samples, gamma)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached
        assert (decoded.iterations, decoded.drafted) == (replayed.iterations, replayed.drafted)
    assert sum(decoded.accepted) > 0


@pytest.mark.parametrize("tree", [None, (2, 4)], ids=["chain", "tree"])
@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(0.8, top_k=3)], ids=["t1", "t0.8-topk3"])
def test_sampled_eagle_output_follows_target_distribution(tree, sampling: SamplingConfig) -> None:
    vocab, n_tokens, runs = 5, 4, 3000
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    draft = random_eagle(target, vocab=[0, 2, 3, 4], seed=2, scale=0.3)  # q = 0 on id 1
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    gen = torch.Generator().manual_seed(7)
    scorer, drafter = TargetScorer(target), EagleDrafter(draft, vocab, tree)
    counts, results = sampled_joint(scorer, drafter, prompt, n_tokens, 2, sampling, gen, runs, vocab)
    accepted = sum(sum(r.stats.accepted) for r in results)
    assert accepted > runs * 0.3  # drafts were often kept
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


def test_training_time_test_rows_are_the_drafters_steps() -> None:
    """unroll(own=False) at depth j, row u equals drafting entry by entry with the true tokens."""
    from specdec.reference.core.forward import forward
    from specdec.reference.core.seams import Needs
    from specdec.reference.eagle.unroll import unroll

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = random_eagle(target, seed=4)
    seq = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    _, hidden, _ = forward(target, torch.tensor([seq]), 1, Needs(hidden=True))
    with torch.inference_mode():
        logits, _ = unroll(draft, hidden, torch.tensor([seq]), 3, own=False)
        s = 4  # the block that starts at entry 4: depth 3 sits at row 6
        out, k, v = draft(hidden[:, :s + 1], torch.tensor([seq[1:s + 2]]), torch.arange(s + 1)[None], None,
                          torch.ones(s + 1, s + 1, dtype=torch.bool).tril())
        keys, values, f = k, v, out[:, -1:]
        for j in (2, 3):
            u = s + j - 1
            m = keys.shape[1]
            f, k, v = draft(f, torch.tensor([[seq[u + 1]]]), torch.tensor([[u]]), (keys, values),
                            torch.ones(1, m + 1, dtype=torch.bool))
            keys, values = torch.cat([keys, k], 1), torch.cat([values, v], 1)
            torch.testing.assert_close(draft.logits(f[0, 0]), logits[j - 1][0, u], atol=1e-4, rtol=1e-4)


def test_saved_draft_loads_for_its_target_only(tmp_path) -> None:
    from specdec.errors import SpecdecError
    from specdec.reference.eagle.store import load_eagle, save_eagle
    from tests.tiny_models import save_tiny_model

    a, b = save_tiny_model(tmp_path / "a", seed=0), save_tiny_model(tmp_path / "b", seed=1)
    from transformers import AutoModelForCausalLM
    from specdec.reference.heads.store import weights_fingerprint
    model = AutoModelForCausalLM.from_pretrained(a)
    draft = random_eagle(model, seed=5)
    save_eagle(draft, {"target": {"name": "a", "weights_sha256": weights_fingerprint(a)}}, tmp_path / "eagle")
    loaded, card = load_eagle(tmp_path / "eagle", model, a)
    for name, p in draft.trained().items():
        torch.testing.assert_close(loaded.trained()[name], p)
    with pytest.raises(SpecdecError, match="trained for target"):
        load_eagle(tmp_path / "eagle", AutoModelForCausalLM.from_pretrained(b), b)


def test_draft_timing_cycles_keep_the_cache_aligned() -> None:
    """The cost timing re-commits its one target pass each cycle: the draft adds one entry per
    committed token, as in decoding (not the pass's rows again)."""
    from specdec.reference.estimate.timing import time_draft_steps

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    drafter = EagleDrafter(random_eagle(target), 16)
    timing = time_draft_steps(drafter, target, list(range(16)) * 8, GREEDY, context_tokens=32, gamma=3, repeats=4)
    assert timing.mean_proposed == 3
    assert drafter.cached == len(drafter.tokens) - 1
