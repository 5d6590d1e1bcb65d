"""Several drafts verified in one target pass as a token tree (tiny real Llama and GPT-2).

- Each tree node's logits equal those of a plain causal pass over the committed sequence and
  the node's path (the tree mask and position ids are right).
- After keeping one path, the KV cache equals a re-encode of the accepted sequence (the next
  pass's logits match a fresh session's).
- Greedy decoding with parallel drafts from the heads' lattice (p in {2, 4}, with and without
  n-gram rescoring) equals the target's own greedy output token for token; the estimator's
  lattices along the greedy text replay it count for count.
- In serve-bench's ragged batches the heads' lattice decodes as alone, its law counts the nodes
  each pass fed (more than gamma) and t(B, k) is timed up to its largest tree.
- Sampling with a tree of sampled drafts is refused in one line; deterministic trees (a fixed
  tree, the heads' lattice) at temperature > 0 (recursive rejection over siblings) follow the
  target (chi-square).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specdec.ngram.model import NgramModel
from specdec.reference.model.kv_session import KVSession
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import NOTHING, Proposal
from specdec.reference.model.target import TargetScorer
from specdec.reference.core.tree import depths, greedy_tree_verdict, trie
from specdec.reference.drafters.lattice import LatticeDrafter
from tests.fakes import random_heads
from tests.ngram_corpus import EOS_ID, VOCAB
from tests.tiny_models import tiny_gpt2, tiny_llama

GREEDY = SamplingConfig(0.0)
PATHS = [[3, 5, 7], [3, 5, 2], [3, 1], [4, 4, 4, 4], [6]]


def test_trie() -> None:
    tokens, parents = trie(PATHS)
    assert tokens == [3, 5, 7, 2, 1, 4, 4, 4, 4, 6]
    assert parents == [-1, 0, 1, 1, 0, -1, 5, 6, 7, -1]
    assert depths(parents) == [1, 2, 3, 3, 2, 1, 2, 3, 4, 1]


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
def test_tree_pass_equals_plain_passes_and_cache_is_a_reencode(arch) -> None:
    model = arch(vocab_size=16, seed=0, sharpness=8.0)
    committed = [1, 2, 3, 9, 8, 7]
    tokens, parents = trie(PATHS)
    session = KVSession(model)
    session.start(committed)
    logits = session.extend_tree(tokens, parents).logits  # [1 + N, V]
    with torch.inference_mode():
        plain = model(input_ids=torch.tensor([committed])).logits[0, -1]
        torch.testing.assert_close(logits[0], plain, atol=1e-4, rtol=1e-4)
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path.insert(0, tokens[node])
                node = parents[node]
            ref = model(input_ids=torch.tensor([committed + path])).logits[0, -1]
            torch.testing.assert_close(logits[1 + i], ref, atol=1e-4, rtol=1e-4)
    nodes, nxt = greedy_tree_verdict(logits, tokens, parents)
    session.keep_tree_path([5, 6], [4, 4])  # the path 4, 4
    session.append([11])
    after = session.extend([], n_logits=1).logits[-1]
    assert session.cache.get_seq_length() == len(committed) + 3
    with torch.inference_mode():
        ref = model(input_ids=torch.tensor([committed + [4, 4, 11]])).logits[0, -1]
    torch.testing.assert_close(after, ref, atol=1e-4, rtol=1e-4)
    assert nodes == [] or tokens[nodes[0]] in (3, 4, 6)


@pytest.mark.parametrize("p, use_ngram", [(2, False), (4, False), (4, True)])
def test_greedy_parallel_drafts_equal_greedy_target(tiny_models, p, use_ngram) -> None:
    target = tiny_llama(vocab_size=VOCAB, seed=0, sharpness=8.0)
    ngram = NgramModel.load(tiny_models[2], VOCAB, eos_id=EOS_ID) if use_ngram else None
    prompt = [5, 9, 2, 33, 7, 12]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    for gamma in (1, 3):
        drafter = LatticeDrafter(random_heads(target, 3, scale=0.05), VOCAB, k=3, p=p, rescorer=ngram,
                                 weight=0.5 if use_ngram else 0.0)
        for fuse in (False, True):
            result = speculative_decode(TargetScorer(target), drafter, prompt, 40, gamma, GREEDY, None,
                                        fuse_prefill=fuse)
            assert result.tokens == reference, (gamma, fuse)
            if gamma == 3:
                assert result.stats.verified > result.stats.drafted  # trees, not chains, were verified


@pytest.mark.parametrize("p, use_ngram", [(1, False), (2, False), (3, False), (3, True)])
def test_replay_of_lattice_trees_equals_the_decoder(tiny_models, p, use_ngram) -> None:
    """The estimator's contract for a heads lattice (`estimate.tree_walk`: each draft length's
    lattice from the teacher-forced state, walked along the target's greedy text) replays greedy
    decoding with that lattice count for count; alpha is its first level's acceptance."""
    from specdec.reference.estimate.alpha import alpha_from_scores
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions
    from tests.fakes import decode_stats

    vocab = VOCAB if use_ngram else 16  # a small vocabulary: the near-untrained heads' drafts (y again) get accepted
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=8.0)
    heads = random_heads(target, 3, scale=0.05)
    ngram = NgramModel.load(tiny_models[2], VOCAB, eos_id=EOS_ID) if use_ngram else None

    def make():
        return LatticeDrafter(heads, vocab, k=3, p=p, rescorer=ngram, weight=0.5 if use_ngram else 0.0)

    prompts = [[5, 9, 2, 13, 7, 12], [1, 2, 3, 4, 5, 6], [4, 4, 7, 1, 0, 3], [7, 7, 8, 8, 9, 9]]
    samples = generate_continuations(target, prompts, 24, GREEDY, None)
    scores = score_positions(target, make().teacher_forced_scorer(target, 4, None), samples, GREEDY, vocab,
                             max_gamma=4)
    for gamma in (1, 2, 3, 4):
        replayed, _ = replay([s.accept() for s in scores], [s.block for s in scores], gamma, 4,
                             [s.nodes for s in scores])
        decoded = decode_stats(target, make, samples, gamma)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached, gamma
        assert (decoded.iterations, decoded.drafted, decoded.verified) == (replayed.iterations, replayed.drafted,
                                                                            replayed.verified), gamma
    assert sum(decoded.accepted_hist[1:]) > 0  # drafts were accepted: the comparison bites
    assert p == 1 or decoded.verified > decoded.drafted  # lattices of several paths: nodes, not depths, verified
    est = alpha_from_scores(scores, (1.0,), np.random.default_rng(0), 50, max_gamma=4)
    assert "token tree" in est.estimates and 0 < est.alpha <= 1 and est.proposal_rate == 1


def test_sampled_lattice_decodes_accept_the_walk_along_their_own_output() -> None:
    """At T = 1 the heads' lattice accepts, given the emitted tokens, the walk along them: the
    estimator's lattices along each sampled decode's output replay its counts exactly."""
    from tests.fakes import sampled_tree_runs

    target = tiny_llama(vocab_size=16, seed=0, sharpness=4.0)
    heads = random_heads(target, 3, scale=0.05)
    prompts = [[5, 9, 2, 13, 7, 12], [1, 2, 3, 4, 5, 6], [4, 4, 7, 1, 0, 3], [7, 7, 8, 8, 9, 9]]
    for gamma in (2, 3):
        decoded, replayed = sampled_tree_runs(target, lambda: LatticeDrafter(heads, 16, k=3, p=3), prompts, 24, gamma,
                                              SamplingConfig(1.0), 3, 16)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached
        assert (decoded.iterations, decoded.drafted, decoded.verified) == (replayed.iterations, replayed.drafted,
                                                                            replayed.verified)
    assert sum(decoded.accepted_hist[1:]) > 0


def test_serve_bench_runs_the_heads_lattice_and_prices_its_nodes() -> None:
    from specdec.reference.measure.serving import ServeConfig, serve_bench

    target = tiny_llama(vocab_size=VOCAB, seed=0, sharpness=8.0)
    lattice = LatticeDrafter(random_heads(target, 3, scale=0.05), VOCAB, k=3, p=2)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, VOCAB, (10,), generator=g).tolist() for _ in range(4)]
    config = ServeConfig(batch_sizes=(1, 2), contexts=(10,), gammas=(3,), new_tokens=8, prompts=4, blocks=1,
                         timing_repeats=1)
    out = serve_bench(target, {10: prompts}, {"lattice": lattice}, config)["contexts"][0]
    assert len(out["timing"]["seconds"][0]) == lattice.max_nodes(3) + 1 == 7  # t(B, k), k = 1..6 nodes + 1
    row = next(m for m in out["methods"] if m["method"] == "lattice gamma=3")
    joint = np.array(row["points"][0]["joint"])
    assert joint[4:].sum() > 0  # passes fed trees of more nodes than gamma
    assert all(np.isfinite(p["predicted_speedup"]) and p["predicted_speedup"] > 0 for p in row["points"])


def test_sampling_with_a_tree_of_sampled_drafts_is_refused() -> None:
    class SampledTrees(_FixedTreeDrafter):
        deterministic = False

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    with pytest.raises(ValueError, match="sampled drafts"):
        speculative_decode(TargetScorer(target), SampledTrees(16), [1, 2, 3], 8, 3, SamplingConfig(1.0),
                           torch.Generator().manual_seed(0))


@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(0.7, top_p=0.9)], ids=["t1", "t0.7-topp0.9"])
def test_sampled_lattice_follows_the_target(sampling: SamplingConfig) -> None:
    """The heads' lattice (its 2 best paths of the top-2 lattice, random heads) at T > 0: the
    joint of the first 3 tokens over 2500 decodes against the exact joint, Pearson chi-square
    at significance 1e-3, fixed seed."""
    from tests.stats_helpers import chi_square_pvalue
    from tests.tiny_models import exact_joint, sampled_joint

    vocab, n_tokens, runs = 5, 3, 2500
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    drafter = LatticeDrafter(random_heads(target, 2, seed=3, scale=0.3), vocab, k=2, p=2)
    gen, scorer = torch.Generator().manual_seed(5), TargetScorer(target)
    counts, results = sampled_joint(scorer, drafter, prompt, n_tokens, 2, sampling, gen, runs, vocab)
    accepted = sum(sum(r.stats.accepted) for r in results)
    assert accepted > runs * 0.2
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


def test_lattice_study_replays_the_decoder_and_orders_its_methods(tiny_models, tmp_path) -> None:
    """The study's block efficiency of the base heads equals the decoder's tokens per pass on the
    same greedy text (prompts after the tuning ones), parallel p=2 equals the decoder with the
    lattice drafter, and the oracle top-k is an upper bound of every p-path method."""
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.heads.lattice import study

    target = tiny_llama(vocab_size=VOCAB, seed=0, sharpness=8.0)
    heads = random_heads(target, 3, scale=0.05)
    prompts = [[5, 9, 2, 33, 7, 12], [1, 2, 3, 4, 5, 6], [40, 41, 42, 43, 44, 45], [7, 7, 8, 8, 9, 9]]
    samples = generate_continuations(target, prompts, 24, GREEDY, None)
    ngram = NgramModel.load(tiny_models[2], VOCAB, eos_id=EOS_ID)
    result = study(target, heads, samples, {"2-gram": ngram}, k=3, ps=(1, 2), oracle_ks=(3,), tune=1)
    eff = {r["method"]: r["block_efficiency"] for r in result["block_efficiency"]}
    at_depth = {(r["method"], r["depth"]): r["block_efficiency"] for r in result["by_depth"]}
    for name, drafter, gamma in (("base", LatticeDrafter(heads, VOCAB, k=3, p=1), 3),
                                 ("parallel base p=2", LatticeDrafter(heads, VOCAB, k=3, p=2), 3),
                                 ("parallel base p=2", LatticeDrafter(heads, VOCAB, k=3, p=2), 2),
                                 ("2-gram parallel p=2", LatticeDrafter(heads, VOCAB, k=3, p=2, rescorer=ngram,
                                                                       weight=result["weights"]["2-gram"]), 2)):
        tokens = passes = 0
        for prompt, cont in zip(samples.prompts[1:], samples.continuations[1:]):
            r = speculative_decode(TargetScorer(target), drafter, prompt, len(cont), gamma, GREEDY, None)
            assert r.tokens == cont
            tokens, passes = tokens + r.stats.new_tokens, passes + r.stats.iterations
        assert at_depth[(name, gamma)] == pytest.approx(tokens / passes), (name, gamma)  # the drafter searches depth gamma
        if gamma == 3:
            assert eff[name] == pytest.approx(tokens / passes), name
    assert eff["oracle top-3"] >= max(v for m, v in eff.items() if not m.startswith("oracle")) - 1e-12
    assert eff["parallel base p=2"] >= eff["base"] - 1e-12 and eff["2-gram parallel p=2"] >= eff["2-gram rescored"] - 1e-12
    curve = [r["block_efficiency"] for r in result["oracle_curve"]]
    assert [r["k"] for r in result["oracle_curve"]] == [1, 2, 3] and curve == sorted(curve)
    assert curve[0] == pytest.approx(eff["base"]) and curve[-1] == pytest.approx(eff["oracle top-3"])
    depth3 = {r["method"]: r for r in result["by_depth"] if r["depth"] == 3}
    assert depth3["base"]["block_efficiency"] == pytest.approx(eff["base"])
    assert all(r["tree_tokens"] <= r["depth"] * 2 for r in result["by_depth"] if r["method"] == "parallel base p=2")
    from specdec.figures.lattice import write_lattice
    assert all(p.is_file() for p in write_lattice(result, tmp_path))


def test_tree_plan_arithmetic_and_step_timing() -> None:
    from specdec.reference.heads.tree_plan import verify_step_seconds
    from specdec.simulator.trees import plan_trees, steps_from_curve

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    steps = verify_step_seconds(target, [1, 2, 3, 4, 5, 6], [0, 3, 7], depth=3, repeats=1)
    assert set(steps) == {0, 3, 7} and all(s > 0 for s in steps.values())
    rows = [{"method": "a", "depth": 3, "block_efficiency": 1.5, "tree_tokens": 3.0, "choose_ms": 1.0},
            {"method": "b", "depth": 2, "block_efficiency": 2.0, "tree_tokens": 5.0, "choose_ms": 0.0},
            {"method": "oracle top-2", "block_efficiency": 3.0, "tree_tokens": None, "choose_ms": None}]
    plan = plan_trees(rows, {0: 0.010, 3: 0.012, 7: 0.020}, draft_seconds=0.001)
    assert [(r.method, r.depth) for r in plan.rows] == [("b", 2), ("a", 3)]  # best first; the oracle is no drafter
    assert plan.rows[1].predicted_speedup == pytest.approx(1.5 * 0.010 / (0.012 + 0.001 + 0.001))
    assert plan.rows[0].predicted_speedup == pytest.approx(2.0 * 0.010 / (0.016 + 0.001))
    # a row's own drafting time (the feature draft's trees: one layer call per depth) adds to its iteration
    own = plan_trees([{**rows[0], "draft_ms": 4.0}], {0: 0.010, 3: 0.012, 7: 0.020}, draft_seconds=0.001)
    assert own.rows[0].predicted_speedup == pytest.approx(1.5 * 0.010 / (0.012 + 0.001 + 0.004 + 0.001))
    # from a verify-cost curve: N nodes ride in a pass over N + 1 tokens
    assert steps_from_curve(0.01, [1.0, 1.2, 1.5]) == {0: 0.01, 1: 0.012, 2: 0.015}
    with pytest.raises(ValueError, match="exceed"):
        plan_trees(rows, {0: 0.010, 3: 0.012}, draft_seconds=0.0)


class _FixedTreeDrafter:
    """A deterministic tree drafter: after the last committed token x it proposes the tree of the
    paths [x+1, x+2], [x+1, x+3], [x+2], [x+4, x+1] (mod V): siblings at two depths, a leaf, and
    a second root child tried after the first is rejected."""

    needs = NOTHING
    deterministic, tree, fallback, max_draft = True, True, False, None

    def __init__(self, vocab: int) -> None:
        self.vocab, self.last = vocab, 0

    def start(self, prompt, prefill=None) -> None:
        self.last = int(prompt[-1])

    def propose(self, gamma, sampling, generator, keep_going=None) -> Proposal:
        x, v = self.last, self.vocab
        paths = [[(x + 1) % v, (x + 2) % v], [(x + 1) % v, (x + 3) % v], [(x + 2) % v], [(x + 4) % v, (x + 1) % v]]
        tokens, parents = trie([path[:gamma] for path in paths])
        return Proposal(torch.tensor(tokens), None, parents)

    def commit(self, verdict, scored) -> None:
        self.last = int(verdict.tokens[-1])


@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(0.8, top_k=4)], ids=["t1", "t0.8-topk4"])
def test_sampled_tree_verification_follows_the_target(sampling: SamplingConfig) -> None:
    """Deterministic trees verified at temperature > 0 by recursive rejection over siblings: the
    joint of the first 3 tokens over 3000 decodes against the exact joint (enumerated), Pearson
    chi-square at significance 1e-3, fixed seed; the trees' second and later siblings were
    accepted too (the recursion really ran)."""
    from tests.stats_helpers import chi_square_pvalue
    from tests.tiny_models import exact_joint

    vocab, n_tokens, runs = 6, 3, 3000
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    gen, scorer, drafter = torch.Generator().manual_seed(11), TargetScorer(target), _FixedTreeDrafter(vocab)
    counts = np.zeros([vocab] * n_tokens)
    later_siblings = 0
    for _ in range(runs):
        r = speculative_decode(scorer, drafter, prompt, n_tokens, 2, sampling, gen)
        counts[tuple(r.tokens)] += 1
        first = (prompt[-1] + 1) % vocab
        later_siblings += int(r.from_drafter[0] and r.tokens[0] != first)
    assert later_siblings > runs * 0.05
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3
