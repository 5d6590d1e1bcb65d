"""The values that cross the decoder's seams (reference/core/seams.py) and the pass that fills
them (reference/model/forward.py), on tiny real Llama and GPT-2 models:

- `forward` without Needs is the plain call (no hidden states); with Needs(hidden=True) its
  hidden states are exactly the output layer's input (the output layer applied to them gives
  the logits), whether they come from the decoder-and-output-layer split (hidden only) or from
  the model's `output_hidden_states` (with Needs(layers=...), which stacks the selected ones);
  a model whose forward changes its logits beyond the output layer is not split;
- the scorer returns the hidden states of every position a pass feeds, aligned at the end with
  the logits rows (`Scored.hidden_of`), for the prefill, a chain and a token tree, equal to a
  fresh full pass over the same tokens;
- `Verdict.last_row` names the row of the last emitted token: n_accepted for a chain, the row
  of the last accepted node for a tree (0 when none was accepted).
"""
from __future__ import annotations

import pytest
import torch

from specdec.reference.model.forward import forward
from specdec.reference.core.seams import NOTHING, Needs, Proposal, Scored, Verdict
from specdec.reference.model.target import TargetScorer
from specdec.reference.core.tree import trie
from tests.tiny_models import tiny_gpt2, tiny_llama


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
def test_forward_returns_the_output_layers_input(arch) -> None:
    model = arch(vocab_size=16, seed=0)
    ids = torch.tensor([[1, 5, 2, 9, 3, 7]])
    plain, none, _ = forward(model, ids, 2)
    split, split_hidden, no_layers = forward(model, ids, 2, Needs(hidden=True))
    logits, hidden, layers = forward(model, ids, 2, Needs(hidden=True, layers=(0, 1)))
    assert none is None and no_layers is None and hidden.shape[:2] == (1, 6) and layers.shape[:3] == (1, 6, 2)
    torch.testing.assert_close(logits, plain)
    torch.testing.assert_close(split, plain, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(split_hidden, hidden, atol=1e-5, rtol=1e-5)
    with torch.inference_mode():
        relogits = model.get_output_embeddings()(hidden[:, -2:])
        embeddings = model.get_input_embeddings()(ids)
    torch.testing.assert_close(relogits, logits, atol=1e-5, rtol=1e-5)
    if arch is tiny_llama:  # Llama's hidden_states[0] is the token embedding itself
        torch.testing.assert_close(layers[:, :, 0], embeddings)


class Capped(torch.nn.Module):
    """A causal LM whose forward soft-caps its logits (as Gemma 2 does): not just output layer(hidden)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner, self.config = inner, inner.config

    @property
    def device(self) -> torch.device:
        return self.inner.device

    def get_decoder(self):
        return self.inner.get_decoder()

    def get_output_embeddings(self):
        return self.inner.get_output_embeddings()

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        out.logits = 3.0 * torch.tanh(out.logits / 3.0)
        return out


def test_a_model_that_changes_its_logits_is_not_split() -> None:
    model = Capped(tiny_llama(vocab_size=16, seed=0, sharpness=8.0))
    ids = torch.tensor([[1, 5, 2, 9]])
    plain, _, _ = forward(model, ids, 1)
    logits, hidden, _ = forward(model, ids, 1, Needs(hidden=True))
    torch.testing.assert_close(logits, plain)  # the capped logits, from the model's own forward
    assert hidden.shape[:2] == (1, 4)
    forward(model.inner, ids, 1, Needs(hidden=True))
    from specdec.reference.model.forward import _SPLITS
    assert _SPLITS[model] is False and _SPLITS[model.inner] is True  # the check refused the split, for this model only


@torch.inference_mode()
def _fresh_hidden(model, tokens: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([tokens]), output_hidden_states=True).hidden_states[-1][0]  # [L, d]


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
def test_scorer_hidden_states_align_with_the_logits(arch) -> None:
    model = arch(vocab_size=16, seed=0, sharpness=8.0)
    prompt = [1, 5, 2, 9, 3]
    scorer = TargetScorer(model)
    prefill = scorer.start(prompt, needs=Needs(hidden=True))
    assert prefill.logits.shape[0] == 1 and prefill.hidden.shape[0] == len(prompt) - 1
    torch.testing.assert_close(prefill.hidden_of(0), _fresh_hidden(model, prompt[:-1])[-1], atol=1e-5, rtol=1e-5)
    assert scorer.score(Proposal.empty()).hidden is None  # NOTHING asked, nothing kept
    scorer.commit(Verdict(0, torch.tensor([4]), True))
    chain = scorer.score(Proposal(torch.tensor([6, 8])), Needs(hidden=True))  # pending 4, drafts 6, 8
    fresh = _fresh_hidden(model, prompt + [4, 6, 8])
    assert chain.logits.shape[0] == 3
    for row in range(3):
        torch.testing.assert_close(chain.hidden_of(row), fresh[len(prompt) + row], atol=1e-5, rtol=1e-5)
    scorer.commit(Verdict(1, torch.tensor([6, 11]), False))
    tokens, parents = trie([[2, 3], [2, 5], [7]])
    tree = scorer.score(Proposal(torch.tensor(tokens), None, parents), Needs(hidden=True))
    committed = prompt + [4, 6, 11]
    for node, path in ((0, [2]), (1, [2, 3]), (2, [2, 5]), (3, [7])):
        torch.testing.assert_close(tree.hidden_of(1 + node), _fresh_hidden(model, committed + path)[-1],
                                   atol=1e-5, rtol=1e-5)


def test_verdict_last_row() -> None:
    assert Verdict(0, torch.tensor([5]), False).last_row == 0
    assert Verdict(2, torch.tensor([5, 6, 7]), True).last_row == 2
    assert Verdict(0, torch.tensor([5]), False, []).last_row == 0  # a tree, nothing accepted: the pending row
    assert Verdict(2, torch.tensor([5, 6, 7]), False, [3, 8]).last_row == 9  # a tree: after node 8 is row 9


def test_scored_without_hidden_states_says_why() -> None:
    with pytest.raises(ValueError, match="Needs"):
        Scored(torch.zeros(2, 4)).hidden_of(0)
    assert not NOTHING and Needs(hidden=True) and Needs(layers=(2,))
