"""Local rescoring (Kim et al. 2024, Algorithm 2) as a drafter, with an n-gram or a causal LM of
the target's vocabulary as the rescorer (tiny real Llama and GPT-2):

- the LM rescorer's incremental log-probabilities equal a fresh full pass over each context,
  whatever order the contexts come in (the cache keeps the shared prefix, feeds the rest);
- with the target itself as the rescorer and an overwhelming weight, local rescoring picks the
  target's greedy token whenever the lattice holds it: its accepted length is the oracle's;
- greedy decoding with local rescoring (n-gram and LM) equals the target's greedy output;
- the spec grammar refuses incoherent options in one line.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.ngram.model import NgramModel
from specdec.ngram.rescore import CachedScorer, oracle_accepted, local_rescore
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.lattice import LatticeDrafter
from specdec.reference.drafters.spec import DrafterSpec
from specdec.reference.estimate.blocks import leading_matches
from specdec.reference.heads.lattice import lattices
from specdec.reference.heads.lm_rescorer import LMRescorer
from tests.fakes import random_heads
from tests.ngram_corpus import EOS_ID, VOCAB
from tests.tiny_models import tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(0.0)


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
def test_lm_rescorer_equals_fresh_passes(arch) -> None:
    model = arch(vocab_size=VOCAB, seed=1, sharpness=4.0)
    rescorer = LMRescorer(model, VOCAB + 3)  # a wider target vocabulary: the extra ids get -inf
    rng = np.random.default_rng(0)
    contexts = [(4, 9, 2), (4, 9, 2, 7), (4, 9, 2, 7, 7), (4, 9, 3), (4, 9, 3, 1, 1, 8), (5,), (5, 6), (4, 9, 2, 7)]
    contexts += [tuple(int(x) for x in rng.integers(0, VOCAB, size=int(rng.integers(1, 12)))) for _ in range(10)]
    for ctx in contexts:
        got = rescorer.log_q(ctx)
        with torch.inference_mode():
            ref = model(input_ids=torch.tensor([list(ctx)])).logits[0, -1].float().log_softmax(-1).numpy()
        np.testing.assert_allclose(got[:VOCAB], ref, atol=1e-4, rtol=1e-4)
        assert np.all(np.isneginf(got[VOCAB:]))
    assert rescorer.advance(rescorer.state_for([1, 2]), 3) == (1, 2, 3)


def test_target_as_its_own_local_rescorer_reaches_the_oracle() -> None:
    target = tiny_llama(vocab_size=VOCAB, seed=0, sharpness=8.0)
    heads = random_heads(target, 3, scale=0.05)
    prompt = [5, 9, 2, 33, 7, 12]
    cont = autoregressive_decode(TargetScorer(target), prompt, 24, GREEDY, None).tokens
    rescorer = LMRescorer(target, VOCAB)
    reached = 0
    for t, lat in enumerate(lattices(target, heads, prompt, cont, k=4)):
        truth = cont[t:t + 3]
        path = local_rescore(lat, CachedScorer(rescorer), rescorer.state_for(prompt + cont[:t]), weight=1e6)
        assert leading_matches(path, truth) == oracle_accepted(lat, truth), t
        reached += oracle_accepted(lat, truth) > leading_matches([int(x) for x in lat.ids[:, 0]], truth)
    assert reached > 0  # the rescorer repaired some of the base heads' drafts


@pytest.mark.parametrize("rescorer_kind", ["ngram", "lm"])
def test_greedy_local_rescoring_equals_greedy_target(tiny_models, rescorer_kind) -> None:
    target = tiny_llama(vocab_size=VOCAB, seed=0, sharpness=8.0)
    rescorer = (NgramModel.load(tiny_models[2], VOCAB, eos_id=EOS_ID) if rescorer_kind == "ngram"
                else LMRescorer(tiny_gpt2(vocab_size=VOCAB, seed=3, sharpness=4.0), VOCAB))
    prompt = [5, 9, 2, 33, 7, 12]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    heads = random_heads(target, 3, scale=0.05)
    for gamma in (1, 3):
        drafter = LatticeDrafter(heads, VOCAB, k=4, p=1, rescorer=rescorer, weight=1.0, local=True)
        for fuse in (False, True):
            result = speculative_decode(TargetScorer(target), drafter, prompt, 40, gamma, GREEDY, None,
                                        fuse_prefill=fuse)
            assert result.tokens == reference, (gamma, fuse)
    with pytest.raises(ValueError, match="rescorer and p = 1"):
        LatticeDrafter(heads, VOCAB, k=4, p=2, rescorer=rescorer, weight=1.0, local=True)


def test_spec_grammar_for_rescorers() -> None:
    spec = DrafterSpec.parse("heads:H,k=8,lm=M,w=0.3,rescore=local")
    assert spec.paths == ["H", "M"]
    assert DrafterSpec.parse("heads:H,ngram=N,rescore=local").paths == ["H", "N"]
    for bad, message in (("heads:H,rescore=local", "needs a rescorer"), ("heads:H,lm=M", "locally only"),
                         ("heads:H,ngram=N,lm=M,rescore=local", "not both"), ("heads:H,rescore=sideways", "global or local"),
                         ("heads:H,ngram=N,p=2,rescore=local", "p=1")):
        with pytest.raises(ValueError, match=message):
            DrafterSpec.parse(bad)
