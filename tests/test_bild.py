"""Big Little Decoder (specdec.reference.bild.policy) on tiny real Hugging Face models (Llama and GPT-2).

- rollback="argmax" + greedy: BiLD's output == the target's greedy output (ours and HF
  `generate`), for several fallback thresholds, window sizes and little models.
- The batched, KV-cached decoder == a literal token-by-token transcription of the paper's
  Algorithm 1 with full forward passes (tokens AND which model wrote each token).
- With the paper's -log p_L(y_S) threshold, quality rises toward the target's as
  alpha_RB falls, and the large model is used more.
- Ablations, the drafter protocol's keep_going (the confidence policy), seeded sampling, the
  quality measures (specdec.reference.bild.quality) and the evaluation rows (specdec.reference.bild.sweep).

The little model is mostly a *noisy copy* of the target (weights + Gaussian noise): two
independently initialised tiny models barely agree, so nothing interesting happens;
a noisy copy agrees often but not always, like a real small model.
"""
from __future__ import annotations

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from specdec.reference.bild.policy import ARGMAX, BildPolicy, bild_decode, first_rollback
from specdec.reference.bild.rollback import parse_rollback
from specdec.reference.core.stats import DecodeStats
from specdec.reference.bild.sweep import Method, run_sweep, summarize, sweep_methods
from specdec.reference.measure.harness import measure
from specdec.reference.core.loop import autoregressive_decode
from specdec.reference.core.policy import ConfidenceThreshold
from specdec.reference.core.seams import NO_PASS, Proposal, Verdict
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.bild.quality import Agreement, greedy_agreement, target_fit
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from tests.fakes import noisy_copy
from tests.tiny_models import tiny_llama

GREEDY = SamplingConfig(temperature=0.0)
VOCAB = 64
PROMPTS = [[5, 9, 2, 33, 7], [1, 2, 3], [40, 41, 12, 8], [7], [60, 3, 3, 9, 11, 50], [22, 23]]


def tiny_gpt2_untied(vocab_size: int = VOCAB, seed: int = 0, sharpness: float = 20.0) -> GPT2LMHeadModel:
    """A tiny GPT-2 with an untied, sharpened output layer (the tied tiny GPT-2 of
    tests.tiny_models falls into one-token loops, where every policy trivially agrees)."""
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=512,
                        tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpness)
    return model


def tiny_llama_sharp(vocab_size: int = VOCAB, seed: int = 0) -> torch.nn.Module:
    return tiny_llama(vocab_size=vocab_size, seed=seed, sharpness=20.0)


ARCHS = [tiny_llama_sharp, tiny_gpt2_untied]


def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@torch.inference_mode()
def algorithm1(target, little, prompt: list[int], n: int, policy: BildPolicy) -> tuple[list[int], list[bool]]:
    """BiLD's Algorithm 1 (greedy), one token at a time, full forward passes, no KV cache.

    The little model appends its argmax while max p_S >= alpha_FB and it has written fewer
    than `room` tokens since the large model last ran; then the large model scores the whole
    sequence, rolls back to the first little token with d = -log p_L(y_S) > alpha_RB (and
    y_S != argmax p_L when keep_argmax), and appends its own argmax there.
    """
    y, src, run = list(prompt), [], 0
    room = min(policy.max_little_steps, n - 1)
    while len(src) < n:
        if run < room:
            p_s = little(input_ids=torch.tensor([y])).logits[0, -1].float().softmax(-1)
            if float(p_s.max()) >= policy.fallback:
                y.append(int(p_s.argmax()))
                src.append(True)
                run += 1
                continue
        logits = target(input_ids=torch.tensor([y])).logits[0].float()  # [len(y), vocab]
        start = len(y) - run  # first little token of this run
        m = run
        for i in range(run):
            row, tok = logits[start + i - 1], y[start + i]
            differs = tok != int(row.argmax())
            if policy.rollback == ARGMAX:
                bad = differs
            else:
                bad = float(-row.log_softmax(-1)[tok]) > policy.rollback and (differs or not policy.keep_argmax)
            if bad:
                m = i
                break
        del y[start + m:]
        del src[len(src) - (run - m):]
        y.append(int(logits[start + m - 1].argmax()))
        src.append(False)
        run = 0
        room = min(policy.max_little_steps, n - len(src) - 1)
    return y[len(prompt):], src


@pytest.mark.parametrize("arch", ARCHS, ids=["llama", "gpt2"])
def test_argmax_rollback_equals_greedy_target(arch) -> None:
    """The strictest rollback (any y_S != argmax p_L) gives exactly the greedy target text."""
    target = arch(seed=0)
    littles = {"noisy0.3": noisy_copy(target, 0.3, 1), "noisy0.6": noisy_copy(target, 0.6, 2),
               "independent": arch(seed=3)}
    total = DecodeStats(10)
    for prompt in PROMPTS[:3]:
        reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
        assert reference == hf_greedy(target, prompt, 40)
        for name, little in littles.items():
            for fallback in (0.0, 0.3, 0.6, 0.9):
                for steps in (1, 4, 10):
                    policy = BildPolicy(fallback, ARGMAX, steps)
                    result = bild_decode(TargetScorer(target), NeuralDrafter(little, VOCAB), prompt, 40, policy,
                                         GREEDY, None)
                    assert result.tokens == reference, (name, policy)
                    assert len(result.from_drafter) == 40
                    if steps == 10:
                        total = total.merge(result.stats)
        result = bild_decode(TargetScorer(target), PromptLookupDrafter(2), prompt, 40, BildPolicy(0.5, ARGMAX, 6),
                             GREEDY, None)
        assert result.tokens == reference
    # the test bites: little tokens were kept, rolled back, and drafting stopped on confidence
    assert total.kept() > 100 and total.rejections() > 20 and total.short_proposals > 20


@pytest.mark.parametrize("arch", ARCHS, ids=["llama", "gpt2"])
@pytest.mark.parametrize("policy", [BildPolicy(0.4, 2.0, 5), BildPolicy(0.6, 1.0, 10), BildPolicy(0.3, 3.0, 3),
                                    BildPolicy(0.0, 2.0, 4), BildPolicy(0.5, math.inf, 6),
                                    BildPolicy(0.4, 2.0, 5, keep_argmax=False)],
                         ids=["fb.4-rb2", "fb.6-rb1", "fb.3-rb3-max3", "nofallback", "norollback", "literal"])
def test_matches_algorithm_1(arch, policy: BildPolicy) -> None:
    """Cached, batched BiLD == Algorithm 1 transcribed literally: same tokens, same authors."""
    target = arch(seed=0)
    little = noisy_copy(target, 0.5, 1)
    for prompt in PROMPTS[:4]:
        result = bild_decode(TargetScorer(target), NeuralDrafter(little, VOCAB), prompt, 30, policy, GREEDY, None)
        tokens, src = algorithm1(target, little, prompt, 30, policy)
        assert result.tokens == tokens
        assert result.from_drafter == src


def evaluate(method: Method, target: TargetScorer, drafter, prompts, references, max_new_tokens: int,
             sampling: SamplingConfig):
    """`method` alone on every prompt through the harness, counted (`summarize`)."""
    decoding = method.decoding(drafter, sampling)
    runs = measure([decoding], target, prompts, max_new_tokens, sampling, seeds=lambda r, j: 0)
    return summarize(method, runs[decoding.name], target.model, prompts, references)


@pytest.mark.parametrize("arch", ARCHS, ids=["llama", "gpt2"])
def test_quality_rises_as_rollback_threshold_falls(arch) -> None:
    """alpha_RB from inf (no rollback) down to 0.5 nats: agreement with the target rises to
    (near) the target's own, and the large model is used more (fewer tokens per pass)."""
    target = arch(seed=0)
    little = noisy_copy(target, 0.5, 1)
    scorer, drafter = TargetScorer(target), NeuralDrafter(little, VOCAB)
    refs = evaluate(Method("ar"), scorer, None, PROMPTS, None, 40, GREEDY).outputs
    rows = []
    for rollback in (math.inf, 4.0, 3.0, 2.0, 1.0, 0.5):
        r = evaluate(Method("bild", policy=BildPolicy(0.3, rollback, 6)), scorer, drafter, PROMPTS, refs, 40, GREEDY)
        rows.append((r.agreement.match_rate(), r.fit.argmax_rate(), r.new_tokens / r.target_passes))
    match, argmax_rate, per_pass = zip(*rows)
    assert all(b >= a - 0.02 for a, b in zip(argmax_rate, argmax_rate[1:])), argmax_rate  # monotone-ish
    assert argmax_rate[-1] >= 0.97 and match[-1] >= 0.9
    assert match[-1] >= match[0] + 0.3 and argmax_rate[-1] >= argmax_rate[0] + 0.1
    assert per_pass[0] > per_pass[-1]  # the price: more large-model passes


def test_ablations() -> None:
    target = tiny_llama_sharp(seed=0)
    little = noisy_copy(target, 0.5, 1)
    no_rb = bild_decode(TargetScorer(target), NeuralDrafter(little, VOCAB), PROMPTS[0], 40,
                        BildPolicy(0.3, math.inf, 6), GREEDY, None)
    s = no_rb.stats
    assert s.rejections() == 0 and s.kept() == s.drafted == sum(no_rb.from_drafter)
    assert s.iterations == 40 - s.kept() and s.short_proposals > 0
    no_fb = bild_decode(TargetScorer(target), NeuralDrafter(little, VOCAB), PROMPTS[0], 40,
                        BildPolicy(0.0, 2.0, 4), GREEDY, None)
    s = no_fb.stats
    assert s.short_proposals == 0  # every handover after exactly min(4, budget) little tokens
    assert s.proposed_hist[4] >= s.iterations - 4 and s.rejections() > 0  # only the last few are budget-capped


class _OldDrafter(DrafterBase):
    """A drafter that cannot stop its drafts on confidence (it never asks keep_going)."""

    fallback = False

    def start(self, prompt, prefill=None):
        pass

    def propose(self, gamma, sampling, generator, keep_going=None):
        return Proposal(torch.full((gamma,), 3, dtype=torch.long))

    def commit(self, verdict, scored):
        pass


def test_fallback_needs_keep_going() -> None:
    target = tiny_llama_sharp(seed=0)
    assert not _OldDrafter().fallback
    assert NeuralDrafter(target, VOCAB).fallback and PromptLookupDrafter().fallback
    with pytest.raises(ValueError, match="keep_going"):
        bild_decode(TargetScorer(target), _OldDrafter(), [1, 2], 5, BildPolicy(0.5, 2.0, 4), GREEDY, None)
    result = bild_decode(TargetScorer(target), _OldDrafter(), [1, 2], 12, BildPolicy(0.0, ARGMAX, 4), GREEDY, None)
    assert result.tokens == autoregressive_decode(TargetScorer(target), [1, 2], 12, GREEDY, None).tokens


@torch.inference_mode()
def test_neural_drafter_confidence_policy() -> None:
    """The confidence policy stops before the first unsure token; tau 0 changes nothing; commit
    after an early stop leaves the drafter's KV cache consistent."""
    little = noisy_copy(tiny_llama_sharp(seed=0), 0.5, 1)
    prompt = [5, 9, 2, 33, 7]
    plain = NeuralDrafter(little, VOCAB)
    plain.start(prompt)
    full = plain.propose(10, GREEDY, None).tokens.tolist()
    zero = NeuralDrafter(little, VOCAB)
    zero.start(prompt)
    assert zero.propose(10, GREEDY, None, keep_going=ConfidenceThreshold(0.0).keep_going).tokens.tolist() == full
    top = [float(little(input_ids=torch.tensor([prompt + full[:i]])).logits[0, -1].softmax(-1).max())
           for i in range(10)]
    threshold = (sorted(top)[2] + sorted(top)[3]) / 2  # three positions below it, seven above
    expected = next(i for i, t in enumerate(top) if t < threshold)
    gated = NeuralDrafter(little, VOCAB)
    gated.start(prompt)
    short = gated.propose(10, GREEDY, None, keep_going=ConfidenceThreshold(threshold).keep_going).tokens.tolist()
    assert short == full[:expected]
    gated.commit(Verdict(len(short), torch.tensor(short + [11]), False), NO_PASS)  # the target's token after the early stop
    fresh = NeuralDrafter(little, VOCAB)
    fresh.start(prompt + short + [11])
    assert gated.propose(5, GREEDY, None).tokens.tolist() == fresh.propose(5, GREEDY, None).tokens.tolist()
    lookup = PromptLookupDrafter(2)
    lookup.start([1, 2, 3, 1, 2])
    assert lookup.propose(3, GREEDY, None, keep_going=ConfidenceThreshold(0.99).keep_going).tokens.tolist() == [3, 1, 2]


def test_seeded_sampling_repeats_exactly() -> None:
    target = tiny_llama_sharp(seed=0)
    little = noisy_copy(target, 0.5, 1)
    sampling = SamplingConfig(1.0, top_k=10)
    runs = [bild_decode(TargetScorer(target), NeuralDrafter(little, VOCAB), PROMPTS[1], 30,
                        BildPolicy(0.3, 2.0, 6), sampling, torch.Generator().manual_seed(5)) for _ in range(2)]
    assert runs[0].tokens == runs[1].tokens and runs[0].from_drafter == runs[1].from_drafter
    assert runs[0].stats.accepted_hist == runs[1].stats.accepted_hist


def test_first_rollback_rules() -> None:
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.45, 0.05], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]))
    draft = torch.tensor([0, 1, 2])  # -log p_L: 0.36, 0.80, 0.22; position 1 is not the argmax
    assert first_rollback(logits, draft, ARGMAX) == 1
    assert first_rollback(logits, draft, 0.5) == 1
    assert first_rollback(logits, draft, 1.0) == 3  # nothing above 1 nat
    assert first_rollback(logits, draft, math.inf) == 3
    assert first_rollback(logits, draft, 0.3) == 1  # position 0 is above 0.3 but is the argmax
    assert first_rollback(logits, draft, 0.3, keep_argmax=False) == 0
    assert first_rollback(logits, torch.empty(0, dtype=torch.long), 0.3) == 0


def test_policy_validation() -> None:
    assert parse_rollback("inf") == math.inf and parse_rollback("argmax") == ARGMAX
    assert parse_rollback("2.5") == 2.5
    for bad in (dict(fallback=1.5), dict(fallback=-0.1), dict(rollback=-1.0), dict(rollback="x"),
                dict(max_little_steps=0)):
        with pytest.raises(ValueError):
            BildPolicy(**bad)
    with pytest.raises(ValueError):
        parse_rollback("lots")


def test_greedy_agreement_counts() -> None:
    assert greedy_agreement([1, 2, 3, 4], [1, 2, 3, 4]) == Agreement(4, 4, 4, 1)
    assert greedy_agreement([1, 2, 9, 4], [1, 2, 3, 4]) == Agreement(3, 4, 2, 1)
    assert greedy_agreement([1, 2], [1, 2, 3, 4]) == Agreement(2, 4, 2, 1)  # missing = mismatch
    assert greedy_agreement([1, 2, 3, 4, 5], [1, 2, 3]) == Agreement(3, 3, 3, 1)
    total = greedy_agreement([1], [1, 2]) + greedy_agreement([3, 3], [3, 3])
    assert total.match_rate() == 0.75 and total.mean_prefix() == 1.5


@torch.inference_mode()
def test_target_fit_matches_stepwise_scores() -> None:
    target = tiny_llama_sharp(seed=0)
    prompt, tokens = [5, 9, 2], [7, 7, 1, 30]
    log_p, hits = 0.0, 0
    for i, x in enumerate(tokens):
        logits = target(input_ids=torch.tensor([prompt + tokens[:i]])).logits[0, -1].double()
        log_p += float(logits.log_softmax(-1)[x])
        hits += int(int(logits.argmax()) == x)
    fit = target_fit(target, prompt, tokens)
    assert fit.tokens == 4 and fit.argmax_hits == hits
    assert fit.log_likelihood == pytest.approx(log_p, abs=1e-4)
    greedy = autoregressive_decode(TargetScorer(target), prompt, 20, GREEDY, None).tokens
    assert target_fit(target, prompt, greedy).argmax_rate() == 1.0


def test_sweep_rows_and_figure(tmp_path) -> None:
    """run_sweep (2 repeats, fastest kept): baseline first (speedup 1), exact SD and
    argmax-BiLD reproduce the greedy target (agreement 1), and the figure function writes its file."""
    from specdec.figures.bild import bild_tradeoff

    target = tiny_llama_sharp(seed=0)
    little = noisy_copy(target, 0.5, 1)
    methods = sweep_methods([0.3, 0.6], [2.0, math.inf, ARGMAX], gammas=[2], handovers=[3])
    assert len(methods) == 6 + 1 + 1
    rows = run_sweep(TargetScorer(target), NeuralDrafter(little, VOCAB), PROMPTS[:3], methods, 20, GREEDY, repeats=2)
    assert [r["kind"] for r in rows] == ["ar"] + ["bild"] * 7 + ["sd"]
    assert rows[0]["speedup"] == 1.0 and rows[0]["match_rate"] == 1.0
    by_label = {r["label"]: r for r in rows}
    assert by_label["SD gamma=2"]["match_rate"] == 1.0
    assert by_label["BiLD FB=0.3 RB=argmax max=10"]["match_rate"] == 1.0
    no_fb = [r for r in rows if r["fallback"] == 0.0]
    assert len(no_fb) == 1 and no_fb[0]["rollback"] == "2" and no_fb[0]["max_little_steps"] == 3
    assert all(r["prompts"] == 3 and r["new_tokens"] == 60 and r["seconds"] > 0 for r in rows)
    path = bild_tradeoff(rows, tmp_path)
    assert path.is_file() and path.stat().st_size > 10_000
