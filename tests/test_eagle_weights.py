"""The feature draft drafting from bfloat16 panels (`eagle:DIR,weights=bf16`; docs/eagle.md,
"Drafting from bfloat16 panels"), on tiny real Hugging Face targets: exact output (greedy chains
and trees, the sampled joint), the estimator replaying the rounded draft count for count, the
option checked in the drafter spec.
"""
import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.eagle import EagleDrafter
from tests.fakes import decode_stats, random_eagle, trained_eagle
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, sampled_joint, tiny_llama

GREEDY = SamplingConfig(temperature=0.0)


@pytest.mark.parametrize("fuse,depth", [((), 1), ((1,), 1), ((1,), 2)], ids=["final", "fused", "fused-two-layer"])
def test_bfloat16_draft_stays_exact_and_the_estimator_replays_it(fuse, depth) -> None:
    """A draft drafting from bfloat16 panels (`weights=bf16`) proposes other tokens at times,
    never other output: greedy chains and trees equal the target's greedy output; the estimator's
    unrolled pass multiplies by the same rounded weights, so its blocks replay decoding count for
    count; the restricted logits stay within bfloat16's rounding of the float32 draft's."""
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = trained_eagle(target, fuse=fuse, depth=depth)
    feature = torch.randn(3, draft.shape.hidden, generator=torch.Generator().manual_seed(0))
    full = draft.logits(feature)
    draft.packed_bf16()
    assert draft.out.packed.dtype == torch.bfloat16
    assert torch.allclose(draft.logits(feature), full, rtol=0.0, atol=0.02 * float(full.abs().max()))
    prompt = [5, 9, 2, 3, 7]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    for tree in (None, (2, 6)):
        for gamma in (1, 2, 4):
            result = speculative_decode(TargetScorer(target), EagleDrafter(draft, 16, tree), prompt, 40, gamma,
                                        GREEDY, None, fuse_prefill=gamma == 2)
            assert result.tokens == reference, (tree, gamma)
    samples = generate_continuations(target, [[1, 5, 2, 9, 3], [4, 4, 7, 1, 0]], 30, GREEDY, None)
    scores = score_positions(target, EagleDrafter(draft, 16).teacher_forced_scorer(target, 4, None), samples,
                             GREEDY, 16, max_gamma=4)
    for gamma in (1, 4):
        replayed, _ = replay([s.accept() for s in scores], [s.block for s in scores], gamma, 4)
        decoded = decode_stats(target, lambda: EagleDrafter(draft, 16), samples, gamma)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.iterations == replayed.iterations
    assert sum(decoded.accepted) > 0


def test_sampled_bfloat16_draft_follows_target_distribution() -> None:
    """At T = 1 the bfloat16 draft's q is just another q: the joint of 4 sampled tokens is still
    the target's (Pearson chi-square, 3000 runs, level 1e-3)."""
    vocab, runs, sampling = 5, 3000, SamplingConfig(1.0)
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    draft = random_eagle(target, vocab=[0, 2, 3, 4], seed=2, scale=0.3).packed_bf16()
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, 4, lambda logits: sampling.probs(logits).double())
    counts, results = sampled_joint(TargetScorer(target), EagleDrafter(draft, vocab), prompt, 4, 2, sampling,
                                    torch.Generator().manual_seed(7), runs, vocab)
    assert sum(sum(r.stats.accepted) for r in results) > runs * 0.3
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


@pytest.mark.parametrize("spec,ok", [("eagle:D,weights=bf16", True), ("eagle:D,tree=4,topk=2,weights=fp32", True),
                                     ("eagle:D,weights=auto", True),
                                     ("eagle:D,weights=fp16", False), ("eagle:D,weights=", False)])
def test_eagle_weights_option_is_checked_in_the_spec(spec: str, ok: bool) -> None:
    from specdec.errors import SpecdecError
    from specdec.reference.drafters.spec import DrafterSpec, eagle_args

    if ok:
        assert DrafterSpec.parse(spec).kind == "eagle" and eagle_args(spec[6:])[2] == spec.rpartition("=")[2]
    else:
        with pytest.raises(SpecdecError, match="weights=auto\\|fp32\\|bf16"):
            DrafterSpec.parse(spec)
