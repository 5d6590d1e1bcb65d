"""Hand-built models, drafters and data for the tests: a context-free `ConstantLM`, a `MaskedLM`,
a deterministic `FixedTokenDrafter`, a word-level tokenizer, random prompts and heads, a noisy
copy of a model, and score comparisons (the saved tiny target/draft pair `tiny_pair` is a
fixture in conftest.py)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Sequence

import copy

import numpy as np
import torch
from transformers import LlamaConfig

from specdec.reference.core.seams import Proposal
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.heads.store import heads_on
from specdec.reference.core.sampling import SamplingConfig

TINY_VOCAB = 64


class ConstantLM(torch.nn.Module):
    """A 'causal LM' whose logits are the same vector at every position (no cache needed).

    It accepts the keyword arguments our code passes to Hugging Face models and ignores the
    context, so p (or q) is known exactly: softmax(logits) adjusted by the sampling.
    """

    def __init__(self, logits: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("vector", torch.tensor(list(logits), dtype=torch.float32))
        self.config = LlamaConfig(vocab_size=len(logits), hidden_size=8, intermediate_size=8,
                                  num_hidden_layers=1, num_attention_heads=1)

    @property
    def device(self) -> torch.device:
        return self.vector.device

    def get_output_embeddings(self):
        return SimpleNamespace(weight=torch.empty(self.vector.shape[0], 1))

    def forward(self, input_ids: torch.Tensor, logits_to_keep: int = 0, **_) -> SimpleNamespace:
        b, n = input_ids.shape
        keep = n if not logits_to_keep else logits_to_keep
        return SimpleNamespace(logits=self.vector.expand(b, keep, -1).clone())


class MaskedLM(torch.nn.Module):
    """A real (tiny) causal LM whose logits are -inf outside `allowed` token ids."""

    def __init__(self, inner: torch.nn.Module, allowed: Sequence[int]) -> None:
        super().__init__()
        self.inner = inner
        mask = torch.zeros(inner.config.vocab_size, dtype=torch.bool)
        mask[list(allowed)] = True
        self.register_buffer("allowed", mask)
        self.config = inner.config

    @property
    def device(self) -> torch.device:
        return self.inner.device

    def get_output_embeddings(self):
        return self.inner.get_output_embeddings()

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        out.logits = out.logits.masked_fill(~self.allowed, float("-inf"))
        return out


class FixedTokenDrafter(DrafterBase):
    """Deterministic drafter: always proposes `token` repeated, except (optionally) at every
    `skip_every`-th committed length, where it proposes nothing."""

    deterministic = True

    def __init__(self, token: int, skip_every: int = 0) -> None:
        self.token = token
        self.skip_every = skip_every
        self.length = 0

    def start(self, prompt: Sequence[int], prefill=None) -> None:
        self.length = len(prompt)

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going=None) -> Proposal:
        if self.skip_every and self.length % self.skip_every == 0:
            return Proposal(torch.empty(0, dtype=torch.long))
        return Proposal(torch.full((gamma,), self.token, dtype=torch.long))

    def commit(self, verdict, scored) -> None:
        self.length += len(verdict.tokens)


def word_tokenizer(vocab_size: int = TINY_VOCAB):
    """A word-level fast tokenizer: words w0..w{V-3}, [UNK], </s> (ids 0..V-1)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(vocab_size - 2)}
    vocab["[UNK]"] = vocab_size - 2
    vocab["</s>"] = vocab_size - 1
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="</s>")


def random_prompts(n: int, length: int, vocab: int = TINY_VOCAB, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (length,), generator=g).tolist() for _ in range(n)]


def assert_same_scores(fast, slow, greedy: bool, atol: float) -> None:
    """Two teacher-forced scorings of the same samples agree position by position."""
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_allclose(a.beta, b.beta, atol=atol)
        np.testing.assert_allclose(a.beta_lenient, b.beta_lenient, atol=atol)
        if greedy:
            np.testing.assert_array_equal(a.match, b.match)


def random_heads(model, n_heads: int, vocab: list[int] | None = None, seed: int = 0, scale: float = 0.5):
    rows = model.get_output_embeddings().weight.shape[0]
    heads = heads_on(model, torch.tensor(vocab if vocab is not None else list(range(rows))), n_heads)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        heads.weight.copy_(torch.randn(heads.weight.shape, generator=g) * scale)
        heads.bias.copy_(torch.randn(heads.bias.shape, generator=g) * scale)
    return heads.eval()


def noisy_copy(model: torch.nn.Module, scale: float, seed: int) -> torch.nn.Module:
    """The model with N(0, (scale * std(param))^2) noise added to every parameter."""
    out = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in out.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale * p.std().clamp_min(1e-3))
    return out


def decode_stats(target, make_drafter, samples, gamma):
    """The merged DecodeStats of greedy speculative decodes of every sample's prompt, each checked
    to emit exactly the target's greedy continuation."""
    from specdec.reference.core.loop import speculative_decode
    from specdec.reference.model.target import TargetScorer

    merged = None
    for prompt, cont in zip(samples.prompts, samples.continuations):
        result = speculative_decode(TargetScorer(target), make_drafter(), prompt, len(cont), gamma,
                                    SamplingConfig(0.0), None)
        assert result.tokens == cont  # exactness: the decode emits the target's greedy tokens
        merged = result.stats if merged is None else merged.merge(result.stats)
    return merged


def sampled_tree_runs(target, make_drafter, prompts, n: int, gamma: int, sampling, width: int, vocab: int):
    """Sampled speculative decodes of `prompts` with a tree drafter (prompt j's generator seeded j),
    then the estimator's trees walked along each decode's own output (`estimate.tree_walk`) and
    replayed: (the decodes' merged DecodeStats, the replay's)."""
    from specdec.reference.core.loop import speculative_decode
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import TargetSamples
    from specdec.reference.estimate.teacher_forced import score_positions
    from specdec.reference.model.target import TargetScorer

    decoded, outputs = None, []
    for j, prompt in enumerate(prompts):
        result = speculative_decode(TargetScorer(target), make_drafter(), prompt, n, gamma, sampling,
                                    torch.Generator().manual_seed(j))
        outputs.append(result.tokens)
        decoded = result.stats if decoded is None else decoded.merge(result.stats)
    samples = TargetSamples([list(p) for p in prompts], outputs, sampling)
    scorer = make_drafter().teacher_forced_scorer(target, width, None)
    scores = score_positions(target, scorer, samples, sampling, vocab, max_gamma=width)
    return decoded, replay([s.accept() for s in scores], [s.block for s in scores], gamma, width,
                           [s.nodes for s in scores])[0]


def random_eagle(model, vocab: list[int] | None = None, seed: int = 0, scale: float = 0.3,
                 fuse: tuple[int, ...] = (), depth: int = 1):
    """A feature draft of `depth` decoder layers on `model` with random weights (exactness tests:
    it need not be good), fusing the hidden states after decoder layers `fuse`."""
    from specdec.reference.eagle.model import draft_on

    rows = model.get_output_embeddings().weight.shape[0]
    draft = draft_on(model, torch.tensor(vocab if vocab is not None else list(range(rows))), fuse, depth)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in draft.trained().items():
            if p.ndim == 2:
                p.add_(torch.randn(p.shape, generator=g) * scale / p.shape[1] ** 0.5)
    return draft.eval()


def trained_eagle(model, seed: int = 0, windows: int = 48, length: int = 24, epochs: int = 6,
                  fuse: tuple[int, ...] = (), depth: int = 1):
    """A feature draft of `depth` decoder layers trained briefly on the target's own samples (so
    its drafts are often kept), fusing the hidden states after decoder layers `fuse`."""
    from specdec.reference.eagle.model import draft_on
    from specdec.reference.eagle.train import EagleTrainConfig, train_eagle
    from specdec.reference.heads.data import distill

    rows = model.get_output_embeddings().weight.shape[0]
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        seqs = torch.randint(0, rows, (windows, 2), generator=g)
        for _ in range(length - 2):
            p = model(input_ids=seqs).logits[:, -1].float().softmax(-1)
            seqs = torch.cat([seqs, torch.multinomial(p, 1, generator=g)], 1)
    torch.manual_seed(seed)
    draft = draft_on(model, torch.arange(rows), fuse, depth)
    train_eagle(draft, distill(model, seqs.tolist(), top_k=min(8, rows), layer_ids=fuse),
                EagleTrainConfig(ttt=2, epochs=epochs, batch=8, lr=1e-2, seed=seed, fuse=fuse, draft_layers=depth))
    return draft.eval()
