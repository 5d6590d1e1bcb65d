"""The vectorised back-off tables agree with KenLM itself, and q is a distribution.

Models are built end to end by the real lmplz + build_binary from a synthetic corpus
(fake vocabulary of 500 ids, 100 of them never seen). For every token id of the
vocabulary, our raw log10 score must equal `kenlm.Model(binary).BaseScore(state, str(id),
out)` within 1e-4, for contexts of every length 0..N+2 (with and without <s>), contexts
with unseen ids, and orders 1..5; `</s>` likewise.
"""
from __future__ import annotations

import math
import os
import time

import kenlm
import numpy as np
import pytest

from specdec.ngram.model import NgramModel
from specdec.ngram.tables import load_tables, tables_path
from tests.ngram_corpus import EOS_ID, SEEN, VOCAB

TOL = 1e-4


def kenlm_scores(km: kenlm.Model, context: list[int], bos: bool) -> tuple[np.ndarray, float]:
    """KenLM's BaseScore of every id str(0..VOCAB-1) and of </s> after `context`."""
    state = kenlm.State()
    (km.BeginSentenceWrite if bos else km.NullContextWrite)(state)
    for w in context:
        out = kenlm.State()
        km.BaseScore(state, str(w), out)
        state = out
    scratch = kenlm.State()
    scores = np.array([km.BaseScore(state, str(i), scratch) for i in range(VOCAB)])
    return scores, km.BaseScore(state, "</s>", scratch)


def contexts(corpus_file, order: int) -> list[list[int]]:
    """Contexts of every length 0..order+2 cut from training lines (so high-order contexts
    exist), plus random ones and ones holding unseen ids."""
    lines = [[int(t) for t in line.split()] for line in corpus_file.read_text().splitlines()]
    rng = np.random.default_rng(order)
    out = []
    for length in range(order + 3):
        for line in (lines[0], lines[7]):
            start = int(rng.integers(0, max(1, len(line) - length)))
            out.append(line[start:start + length])
    out.append([int(x) for x in rng.integers(0, VOCAB, size=order)])           # random, some unseen
    out.append(lines[3][:order - 1] + [SEEN + 5])                               # unseen last word
    out.append([SEEN + 1] + lines[3][:order])                                   # unseen in the middle
    return out


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_raw_scores_agree_with_kenlm_over_whole_vocab(tiny_models, corpus_file, order: int) -> None:
    path = tiny_models[order]
    model = NgramModel.load(path, VOCAB)
    km = kenlm.Model(str(path / "model.binary"))
    assert km.order == max(order, 2)  # order 1 is stored as an order-2 file with no 2-grams
    checked = 0
    for context in contexts(corpus_file, order):
        for bos in (True, False):
            ref, ref_eos = kenlm_scores(km, context, bos)
            state = model.state_for(context, bos)
            ours = model.log10_scores(state)
            assert ours.shape == (VOCAB,)
            np.testing.assert_allclose(ours, ref, atol=TOL, rtol=0, err_msg=f"context {context} bos={bos}")
            assert abs(model.log10_eos(state) - ref_eos) < TOL
            checked += 1
    assert checked >= 2 * (2 * (order + 3) + 3)


def test_incremental_state_equals_state_from_scratch(tiny_models, corpus_file) -> None:
    model = NgramModel.load(tiny_models[4], VOCAB)
    line = [int(t) for t in corpus_file.read_text().split()[:30]]
    state = model.begin()
    for i, t in enumerate(line):
        state = model.advance(state, t)
        assert state == model.state_for(line[:i + 1])
        assert len(state) <= model.order - 1


def test_order_one_ignores_context(tiny_models) -> None:
    model = NgramModel.load(tiny_models[1], VOCAB)
    a = model.log10_scores(model.state_for([1, 2, 3]))
    b = model.log10_scores(model.state_for([]))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("order", [1, 2, 4, 5])
def test_q_is_a_distribution_built_from_the_raw_scores(tiny_models, corpus_file, order: int) -> None:
    model = NgramModel.load(tiny_models[order], VOCAB)  # eos_id from model.json
    assert model.eos_id == EOS_ID
    assert model.n_unseen == VOCAB - SEEN
    for context in contexts(corpus_file, order)[::3]:
        state = model.state_for(context)
        q = model.q(state).astype(np.float64)
        assert q.shape == (VOCAB,) and (q > 0).all()
        assert abs(q.sum() - 1.0) < 1e-5
        # reference in float64: seen ids keep 10**score, unseen ids share <unk>'s mass
        # equally, EOS also gets </s>'s mass, then normalise
        raw = 10.0 ** model.log10_scores(state).astype(np.float64)
        raw[SEEN:] /= VOCAB - SEEN
        raw[EOS_ID] += 10.0 ** model.log10_eos(state)
        np.testing.assert_allclose(q, raw / raw.sum(), rtol=1e-4, atol=1e-9)
        # log_q is normalised in natural log
        assert abs(math.log(np.exp(model.log_q(state).astype(np.float64)).sum())) < 1e-5


def test_q_without_eos_drops_end_of_sentence_mass(tiny_models) -> None:
    from specdec.ngram.tables import load_tables as _load
    model = NgramModel(_load(tiny_models[3] / "model.arpa"), VOCAB, eos_id=None)
    state = model.state_for([3, 4])
    raw = 10.0 ** model.log10_scores(state).astype(np.float64)
    raw[SEEN:] /= VOCAB - SEEN
    np.testing.assert_allclose(model.q(state), raw / raw.sum(), rtol=1e-4, atol=1e-9)


def test_score_sequence_rows_are_q_after_each_prefix(tiny_models, corpus_file) -> None:
    model = NgramModel.load(tiny_models[3], VOCAB)
    seq = [int(t) for t in corpus_file.read_text().split()[:12]] + [SEEN + 3, 5]
    rows = model.score_sequence(seq)
    assert rows.shape == (len(seq), VOCAB) and rows.dtype == np.float32
    for i in range(len(seq)):
        np.testing.assert_allclose(rows[i], model.q(model.state_for(seq[:i + 1])), rtol=1e-6)


def test_tables_cache_is_reused_and_refreshed(tiny_models) -> None:
    arpa = tiny_models[3] / "model.arpa"
    npz = tables_path(arpa)
    assert npz.is_file()  # written by the build
    before = npz.stat().st_mtime_ns
    cached = load_tables(arpa)
    assert npz.stat().st_mtime_ns == before  # read, not rewritten
    fresh = load_tables(arpa, cache=False)
    for k in cached.orders:
        np.testing.assert_array_equal(cached.orders[k].keys, fresh.orders[k].keys)
        np.testing.assert_array_equal(cached.orders[k].logp, fresh.orders[k].logp)
    # a newer ARPA file makes the cache stale: it is rebuilt
    stat = arpa.stat()
    os.utime(arpa, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    time.sleep(0.01)
    load_tables(arpa)
    assert npz.stat().st_mtime_ns != before


def test_vocab_too_small_for_the_model_is_an_error(tiny_models) -> None:
    with pytest.raises(ValueError, match="built for a vocabulary of 500 tokens, more than 300"):
        NgramModel.load(tiny_models[2], 300)
    with pytest.raises(ValueError, match="outside a vocabulary of 300"):
        NgramModel(load_tables(tiny_models[2] / "model.arpa"), 300)


def test_padding_rows_beyond_the_tokenizer_get_no_mass(tiny_models) -> None:
    padded = NgramModel.load(tiny_models[3], VOCAB + 12)  # output layer padded past 500 ids
    plain = NgramModel.load(tiny_models[3], VOCAB)
    state = padded.state_for([3, 4])
    q = padded.q(state)
    assert q.shape == (VOCAB + 12,) and (q[VOCAB:] == 0).all()
    np.testing.assert_allclose(q[:VOCAB], plain.q(plain.state_for([3, 4])), rtol=1e-6)


@pytest.mark.slow
def test_real_corpus_model_agrees_with_kenlm_and_is_fast(tmp_path) -> None:
    """End to end on the real corpus: `specdec ngram build` (plain, order 3), KenLM agreement
    over all 49,152 SmolLM2 ids for held-out contexts, q well under 1 ms per position."""
    import json
    import subprocess
    import sys

    from specdec.reference.data.corpus import eval_prompts
    from tests.ngram_corpus import require_kenlm_tools

    require_kenlm_tools()
    out = tmp_path / "plain-3gram"
    proc = subprocess.run([sys.executable, "-m", "specdec", "ngram", "build", "--order", "3", "--out", str(out),
                           "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["eos_id"] == 2
    vocab = 49152
    model = NgramModel.load(out, vocab)
    km = kenlm.Model(str(out / "model.binary"))
    prompt = eval_prompts(1, min_tokens=40)[0].ids
    for cut in (0, 1, 2, 17, 40):
        state = kenlm.State()
        km.BeginSentenceWrite(state)
        for w in prompt[:cut]:
            nxt = kenlm.State()
            km.BaseScore(state, str(w), nxt)
            state = nxt
        scratch = kenlm.State()
        ref = np.array([km.BaseScore(state, str(i), scratch) for i in range(vocab)])
        np.testing.assert_allclose(model.log10_scores(model.state_for(prompt[:cut])), ref, atol=TOL, rtol=0)
    states = [model.state_for(prompt[:cut]) for cut in range(40)]
    times = []
    for s in states * 5:
        t = time.perf_counter()
        model.log_q(s)
        times.append(time.perf_counter() - t)
    assert np.median(times) < 1e-3
