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
- EAGLE-3's fusion (the committed entries read a middle layer's hidden states too): greedy
  equivalence, the replay, sampling, saving and loading as above; the option refused in one line.
- A two-layer draft (`--draft-layers 2`; the layers' caches travel stacked in one tensor): the
  same greedy equivalence, replay, training-time test rows, sampling and round trip; a one-layer
  draft saved before the layers had their own names still loads.
"""
import math

import numpy as np

import pytest
import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
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


@pytest.mark.parametrize("arch", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("tree", [None, (2, 6)], ids=["chain", "tree"])
@pytest.mark.parametrize("depth", [1, 2], ids=["one-layer", "two-layer"])
def test_greedy_fused_eagle_equals_greedy_target(arch, tree, depth) -> None:
    """A draft that fuses the hidden states after decoder layer 1 (of 2): the layers reach it
    through the scorer seam, fused prefill or not; one or two draft layers."""
    target = arch(vocab_size=16, seed=0, sharpness=8.0)
    prompt = [5, 9, 2, 3, 7]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    draft = trained_eagle(target, fuse=(1,), depth=depth)
    assert draft.layers == (1,) and EagleDrafter(draft, 16).needs.layers == (1,) and draft.depth == depth
    accepted = 0
    for gamma, fuse_prefill in ((1, False), (2, True), (4, False)):
        result = speculative_decode(TargetScorer(target), EagleDrafter(draft, 16, tree), prompt, 40, gamma, GREEDY,
                                    None, fuse_prefill=fuse_prefill)
        assert result.tokens == reference, gamma
        accepted += sum(result.stats.accepted)
    assert accepted > 0


@pytest.mark.parametrize("tree", [None, (2, 6)], ids=["chain", "tree"])
def test_fused_eagle_in_a_ragged_batch_decodes_as_alone(tree) -> None:
    """EAGLE-3's fused layers through the batch scorer: every slot's pass carries the layers the
    draft fuses, and each request of a batch of 3 (prompts of different lengths, padded and packed
    slots) decodes the target's own greedy tokens, with drafts kept."""
    from specdec.reference.core.batch_loop import decode_batch
    from specdec.reference.model.batch_scorer import BatchScorer

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    prompts = [[5, 9, 2, 3, 7], [1, 4], [8, 8, 2, 6, 1, 0, 3, 11], [2, 13, 5]]
    alone = [autoregressive_decode(TargetScorer(target), p, 24, GREEDY, None).tokens for p in prompts]
    draft = trained_eagle(target, fuse=(1,))
    for layout in ("padded", "packed"):
        run = decode_batch(BatchScorer(target, 3, 48, layout), EagleDrafter(draft, 16, tree), prompts, 24, 3, GREEDY,
                           None)
        assert dict(run.outputs) == dict(enumerate(alone)), layout
        assert run.stats.kept() > 0


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


@pytest.mark.parametrize("fuse,depth", [((), 1), ((1,), 1), ((1,), 2)], ids=["final", "fused", "fused-two-layer"])
def test_replay_of_the_feature_draft_equals_the_decoder(fuse, depth) -> None:
    """The estimator's unrolled blocks (one pass per sequence, own tokens, diagonal masks) are
    the drafter's incremental chains: greedy decoding replays count for count."""
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = trained_eagle(target, fuse=fuse, depth=depth)
    samples = generate_continuations(target, [[1, 5, 2, 9, 3], [4, 4, 7, 1, 0], [2, 3, 5, 7, 11]], 30, GREEDY, None)
    drafter = EagleDrafter(draft, 16)
    scores = score_positions(target, drafter.teacher_forced_scorer(target, 6, None), samples, GREEDY, 16, max_gamma=6)
    for gamma in (1, 2, 4, 6):
        replayed, _ = replay([s.accept() for s in scores], [s.block for s in scores], gamma, 6)
        decoded = decode_stats(target, lambda: EagleDrafter(draft, 16), samples, gamma)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached
        assert (decoded.iterations, decoded.drafted) == (replayed.iterations, replayed.drafted)
    assert sum(decoded.accepted) > 0


@pytest.mark.parametrize("tree,fuse", [((2, 4), ()), ((3, 6), ()), ((2, 5), (1,))],
                         ids=["tree4", "tree6", "tree5-fused"])
def test_replay_of_feature_draft_trees_equals_the_decoder(tree, fuse) -> None:
    """The estimator's trees (each draft length's own tree from the teacher-forced cache, walked
    along the target's greedy text) replay greedy tree decoding count for count, the last
    iterations' shorter trees included."""
    from specdec.reference.estimate.alpha import alpha_from_scores
    from specdec.reference.estimate.replay import replay
    from specdec.reference.estimate.samples import generate_continuations
    from specdec.reference.estimate.teacher_forced import score_positions

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = trained_eagle(target, fuse=fuse)
    samples = generate_continuations(target, [[1, 5, 2, 9, 3], [4, 4, 7, 1, 0], [2, 3, 5, 7, 11]], 30, GREEDY, None)
    drafter = EagleDrafter(draft, 16, tree)
    scores = score_positions(target, drafter.teacher_forced_scorer(target, 6, None), samples, GREEDY, 16, max_gamma=6)
    assert all(s.accept().shape[0] == 6 and s.accept().shape[2] == 30 for s in scores)  # a tree per draft length
    for gamma in (1, 2, 4, 6):
        replayed, verified = replay([s.accept() for s in scores], [s.block for s in scores], gamma, 6,
                                    [s.nodes for s in scores])
        decoded = decode_stats(target, lambda: EagleDrafter(draft, 16, tree), samples, gamma)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached
        assert (decoded.iterations, decoded.drafted) == (replayed.iterations, replayed.drafted)
        assert decoded.verified == replayed.verified == (verified * np.arange(verified.size)).sum()  # every node
        assert gamma == 1 or decoded.verified > decoded.drafted  # trees: the pass is priced by their nodes
    assert max(i for i, n in enumerate(decoded.accepted_hist) if n) > 1  # trees accepted several tokens
    est = alpha_from_scores(scores, (1.0,), np.random.default_rng(0), 50, max_gamma=6)
    assert "token tree" in est.estimates and 0 < est.alpha <= 1  # the first level's acceptance


@pytest.mark.parametrize("sampling", [SamplingConfig(1.0), SamplingConfig(0.8, top_k=3)], ids=["t1", "t0.8-topk3"])
def test_sampled_tree_decodes_accept_the_walk_along_their_own_output(sampling) -> None:
    """At T > 0 a deterministic tree accepts, given the tokens decoding emits, exactly the nodes of
    the walk along them (recursive rejection over one-hot siblings): the estimator's trees walked
    along each sampled decode's own output replay its counts exactly."""
    from tests.fakes import sampled_tree_runs

    target = tiny_llama(vocab_size=16, seed=0, sharpness=4.0)
    draft = trained_eagle(target)
    prompts = [[1, 5, 2, 9, 3], [4, 4, 7, 1, 0], [2, 3, 5, 7, 11], [6, 1, 6, 1, 6]]
    for gamma in (2, 4):
        decoded, replayed = sampled_tree_runs(target, lambda: EagleDrafter(draft, 16, (2, 5)), prompts, 30, gamma,
                                              sampling, 4, 16)
        assert decoded.accepted_hist == replayed.accepted_hist and decoded.reached == replayed.reached
        assert (decoded.iterations, decoded.drafted, decoded.verified) == (replayed.iterations, replayed.drafted,
                                                                            replayed.verified)
    assert sum(decoded.accepted_hist[2:]) > 0  # whole paths of two and more were accepted


@pytest.mark.parametrize("tree,sampling,fuse,depth", [
    (None, SamplingConfig(1.0), (), 1), (None, SamplingConfig(0.8, top_k=3), (), 1), ((2, 4), SamplingConfig(1.0), (), 1),
    ((2, 4), SamplingConfig(0.8, top_k=3), (), 1), (None, SamplingConfig(1.0), (1,), 1),
    ((2, 4), SamplingConfig(1.0), (1,), 2)],
    ids=["chain-t1", "chain-t0.8-topk3", "tree-t1", "tree-t0.8-topk3", "fused-chain-t1", "fused-two-layer-tree-t1"])
def test_sampled_eagle_output_follows_target_distribution(tree, sampling: SamplingConfig, fuse, depth) -> None:
    vocab, n_tokens, runs = 5, 4, 3000
    target = tiny_llama(vocab_size=vocab, seed=0, sharpness=6.0)
    draft = random_eagle(target, vocab=[0, 2, 3, 4], seed=2, scale=0.3, fuse=fuse, depth=depth)  # q = 0 on id 1
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    gen = torch.Generator().manual_seed(7)
    scorer, drafter = TargetScorer(target), EagleDrafter(draft, vocab, tree)
    counts, results = sampled_joint(scorer, drafter, prompt, n_tokens, 2, sampling, gen, runs, vocab)
    accepted = sum(sum(r.stats.accepted) for r in results)
    assert accepted > runs * 0.3  # drafts were often kept
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


@pytest.mark.parametrize("depth", [1, 2], ids=["one-layer", "two-layer"])
def test_training_time_test_rows_are_the_drafters_steps(depth) -> None:
    """unroll(own=False) at depth j, row u equals drafting entry by entry with the true tokens."""
    from specdec.reference.model.forward import forward
    from specdec.reference.core.seams import Needs
    from specdec.reference.eagle.unroll import unroll

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = random_eagle(target, seed=4, depth=depth)
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
    fused = random_eagle(model, seed=6, fuse=(1,))  # the card says which layers the draft fuses
    save_eagle(fused, {"target": {"name": "a", "weights_sha256": weights_fingerprint(a)}, "fuse_layers": [1]},
               tmp_path / "fused")
    loaded, _ = load_eagle(tmp_path / "fused", model, a)
    assert loaded.layers == (1,) and set(loaded.trained()) == set(fused.trained()) and "fuse.weight" in fused.trained()
    for name, p in fused.trained().items():
        torch.testing.assert_close(loaded.trained()[name], p)
    deep = random_eagle(model, seed=7, fuse=(1,), depth=2)  # the card says how many layers
    save_eagle(deep, {"target": {"name": "a", "weights_sha256": weights_fingerprint(a)}, "fuse_layers": [1],
                      "draft_layers": 2}, tmp_path / "deep")
    loaded, _ = load_eagle(tmp_path / "deep", model, a)
    assert loaded.depth == 2 and "blocks.1.q.weight" in loaded.trained()
    for name, p in deep.trained().items():
        torch.testing.assert_close(loaded.trained()[name], p)
    with pytest.raises(SpecdecError, match="trained for target"):
        load_eagle(tmp_path / "eagle", AutoModelForCausalLM.from_pretrained(b), b)


def test_one_layer_draft_saved_with_the_old_names_loads(tmp_path) -> None:
    """Drafts saved before the layers were a list named the layer's tensors q.weight, ..., norm_post."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from specdec.reference.eagle.files import WEIGHTS_NAME
    from specdec.reference.eagle.store import load_eagle, save_eagle
    from specdec.reference.heads.store import weights_fingerprint
    from tests.tiny_models import save_tiny_model

    a = save_tiny_model(tmp_path / "a", seed=0)
    model = AutoModelForCausalLM.from_pretrained(a)
    draft = random_eagle(model, seed=5)
    folder = save_eagle(draft, {"target": {"name": "a", "weights_sha256": weights_fingerprint(a)}}, tmp_path / "old")
    tensors = load_file(str(folder / WEIGHTS_NAME))
    save_file({name.removeprefix("blocks.0."): t for name, t in tensors.items()}, str(folder / WEIGHTS_NAME))
    assert "q.weight" in load_file(str(folder / WEIGHTS_NAME))
    loaded, _ = load_eagle(folder, model, a)
    for name, p in draft.trained().items():
        torch.testing.assert_close(loaded.trained()[name], p)


def test_draft_timing_cycles_keep_the_cache_aligned() -> None:
    """The cost timing re-commits its one target pass each cycle: the draft adds one entry per
    committed token, as in decoding (not the pass's rows again)."""
    from specdec.reference.estimate.timing import time_draft_steps

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    drafter = EagleDrafter(random_eagle(target), 16)
    timing = time_draft_steps(drafter, target, list(range(16)) * 8, GREEDY, context_tokens=32, gamma=3, repeats=4)
    assert timing.mean_proposed == 3
    assert drafter.cached == len(drafter.tokens) - 1


@pytest.mark.parametrize("shape,fuse", [((3, None, 1), ()), ((2, 4, 2), ()), ((3, 6, 2), ()), ((3, 6, 2), (1,))],
                         ids=["chain3", "tree4", "tree6", "tree6-fused"])
def test_tree_study_replays_greedy_decoding(shape, fuse) -> None:
    """The tree plan's study (one target pass per sequence, the draft's cache grown entry by entry)
    gives, at every position a greedy decode visits, the tokens that decode's pass commits."""
    from specdec.reference.eagle.tree_study import Shape, study
    from specdec.reference.eagle.tree_study import walked as walked_efficiency

    depth, nodes, topk = shape
    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = trained_eagle(target, fuse=fuse)
    tree = None if nodes is None else (topk, nodes)
    committed: list[int] = []

    class Recording(EagleDrafter):
        def commit(self, verdict, scored) -> None:
            committed.append(len(verdict.tokens))
            super().commit(verdict, scored)

    prompt, n = [5, 9, 2, 3, 7], 40
    cont = autoregressive_decode(TargetScorer(target), prompt, n + depth, GREEDY, None).tokens
    [row] = study(target, EagleDrafter(draft, 16), [(prompt, cont)], [Shape(depth, nodes, topk)])
    assert row["positions"] == n and row["tree_tokens"] == (nodes or depth)
    result = speculative_decode(TargetScorer(target), Recording(draft, 16, tree), prompt, n, depth, GREEDY, None)
    assert result.tokens == cont[:n]
    t, walked = 0, 0
    for step in committed:
        if t > n - depth - 1:  # the decode's last passes may draft fewer than the study does
            break
        assert row["per_pass"][0][t] == step, t
        t, walked = t + step, walked + 1
    assert walked >= 10 and max(committed) > 1  # drafts were accepted: the walk compared something
    compared = committed[:walked]  # block efficiency: the decode's own tokens per pass over the walked stretch
    assert sum(compared) / len(compared) == pytest.approx(walked_efficiency([row["per_pass"][0][:t]]))


def test_tree_study_takes_a_chain_drafter_and_whole_drafts() -> None:
    """The study refuses a tree drafter (its shapes set the tree) and continuations too short for
    a whole draft, and leaves the drafter a chain drafter; a one-token prompt drafts nothing at
    its first position (no entry yet) and counts the target's token there."""
    from specdec.reference.eagle.tree_study import Shape, study

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = random_eagle(target)
    shapes = [Shape(2), Shape(2, 3, 2)]
    with pytest.raises(ValueError, match="chain drafter"):
        study(target, EagleDrafter(draft, 16, (2, 3)), [([1, 2], [3, 4, 5, 6])], shapes)
    with pytest.raises(ValueError, match="more than 2 tokens"):
        study(target, EagleDrafter(draft, 16), [([1, 2], [3, 4])], shapes)
    drafter = EagleDrafter(draft, 16)
    rows = study(target, drafter, [([1], [3, 4, 5, 6, 7])], shapes)
    assert drafter.shape_tree is None and not drafter.tree
    assert all(r["positions"] == 3 and r["per_pass"][0][0] == 1 and math.isfinite(r["draft_ms"]) for r in rows)


def test_eagle_trees_command_plans_shapes_and_sglang_flags(tmp_path, capsys) -> None:
    """`specdec eagle trees` on a tiny target: every shape asked for is planned (best first, finite
    predictions), the best comes with its drafter spec and SGLang's tree flags; a budget no tree of
    the shape can fill is skipped, and no shape at all is one line naming --nodes."""
    import json

    from transformers import AutoModelForCausalLM

    from specdec.reference.eagle.store import save_eagle
    from specdec.reference.heads.store import weights_fingerprint
    from tests.cli_helpers import run_main
    from tests.tiny_models import save_tiny_model

    a = save_tiny_model(tmp_path / "a", seed=0)
    model = AutoModelForCausalLM.from_pretrained(a)
    save_eagle(random_eagle(model, seed=5), {"target": {"name": "a", "weights_sha256": weights_fingerprint(a)}},
               tmp_path / "eagle")
    base = ["eagle", "trees", str(tmp_path / "eagle"), "--target", str(a), "--workload", "chat", "--prompts", "2",
            "--target-backend", "eager"]
    code, out, err = run_main(capsys, base + ["--new-tokens", "6", "--depths", "2,3", "--topks", "1,2",
                                              "--nodes", "3,30", "--json"])
    assert code == 0, err
    plan = json.loads(out)["workloads"]["chat"]
    shapes = {r["method"] for r in plan["plan"]}
    # 30 nodes: no top-2 tree of depth <= 3 has that many candidates
    assert shapes == {"chain g=2", "chain g=3", "tree N=3 K=2 d=2", "tree N=3 K=2 d=3"}
    speedups = [r["predicted_speedup"] for r in plan["plan"]]
    assert speedups == sorted(speedups, reverse=True) and all(s > 0 for s in speedups)
    assert all(1 <= r["block_efficiency"] <= 1 + r["depth"] and r["positions"] == 2 * 6 for r in plan["plan"])
    best, sglang = plan["plan"][0], plan["best"]["sglang"]
    assert sglang["num_steps"] == best["depth"] and sglang["eagle_topk"] == best["topk"]
    assert sglang["num_draft_tokens"] == (best["nodes"] or best["depth"]) + 1
    assert f"--speculative-eagle-topk {best['topk']}" in sglang["flags"]
    code, out, err = run_main(capsys, base + ["--new-tokens", "6", "--depths", "1", "--topks", "3", "--nodes", "3",
                                              "--json"])  # depth 1: three siblings
    assert code == 0, err
    assert [r["method"] for r in json.loads(out)["workloads"]["chat"]["plan"]] == ["tree N=3 K=3 d=1"]
    code, out, err = run_main(capsys, base + ["--new-tokens", "6", "--depths", "2", "--topks", "1,2", "--nodes", "3",
                                              "--temperature", "1", "--json"])  # sampled text, exact node chances
    assert code == 0, err
    report = json.loads(out)
    assert report["temperature"] == 1.0
    rows = report["workloads"]["chat"]["plan"]
    assert {r["method"] for r in rows} == {"chain g=2", "tree N=3 K=2 d=2"}
    assert all(1 <= r["block_efficiency"] <= 3 and r["predicted_speedup"] > 0 for r in rows)
    for extra, option in [(["--topks", "2", "--nodes", "30"], "--nodes"),  # no tree of depth <= 4 fills 30 nodes
                          (["--new-tokens", "4000"], "--new-tokens"),  # beyond the target's positions
                          (["--temperature", "-1"], "--temperature"),
                          (["--workload", "chat,code", "--prompts", "1000"], "--workload")]:  # more than there are
        code, _, err = run_main(capsys, base + extra)
        assert code == 2 and option in err and len(err.strip().splitlines()) == 1, (extra, err)


@pytest.mark.parametrize("layers", ["0", "40", "2,2", "a,b"])
def test_eagle_train_refuses_bad_fuse_layers_before_loading(tmp_path, capsys, layers) -> None:
    from tests.cli_helpers import run_main
    from tests.tiny_models import save_tiny_model

    a = save_tiny_model(tmp_path / "a", seed=0)  # 2 decoder layers: only layer 1 can be fused
    code, _, err = run_main(capsys, ["eagle", "train", "--target", str(a), "--out", str(tmp_path / "out"),
                                     "--fuse-layers", layers])
    assert code == 2 and "--fuse-layers" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra", [["--code-tokens", "40000"], ["--tokens", "4096", "--aligned-tokens", "1000",
                                                                 "--code-tokens", "3500"]])
def test_training_refuses_more_code_than_the_corpus_share_before_loading(tmp_path, capsys, extra) -> None:
    """--code-tokens takes from the corpus windows' share: at most --tokens minus --aligned-tokens."""
    from tests.cli_helpers import run_main
    from tests.tiny_models import save_tiny_model

    a = save_tiny_model(tmp_path / "a", seed=0)
    for kind in ("eagle", "heads"):
        code, _, err = run_main(capsys, [kind, "train", "--target", str(a), "--out", str(tmp_path / "out"),
                                         "--tokens", "40000", "--aligned-tokens", "1000", *extra])
        assert code == 2 and "--code-tokens" in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "out").exists()


def test_eagle3_layers_are_the_engines_defaults() -> None:
    from types import SimpleNamespace

    from specdec.reference.eagle.model import eagle3_layers

    assert eagle3_layers(SimpleNamespace(num_hidden_layers=30)) == (2, 15, 27)  # SmolLM2-135M
    assert eagle3_layers(SimpleNamespace(num_hidden_layers=32)) == (2, 16, 29)  # Llama-3-8B: vLLM, SGLang
    assert eagle3_layers(SimpleNamespace(n_layer=2)) == (1,)


@pytest.mark.parametrize("shape", [(3, None, 1), (3, 6, 2)], ids=["chain3", "tree6"])
def test_sampled_tree_study_predicts_the_first_pass(shape) -> None:
    """At T = 1 the study's expected tokens of a pass from a prefix (the product of p along each
    node's path for a tree, of min(1, p / q) along a drawn chain) equals the mean of what real
    decodes commit in their first pass from that prefix: two-sample z-test, |z| < 3.29 (level
    1e-3), fixed seeds; the study's chain is one draw per seed, so both sides are averaged."""
    from specdec.reference.eagle.tree_study import Shape, study_sampled

    depth, nodes, topk = shape
    sampling = SamplingConfig(1.0)
    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    draft = trained_eagle(target)
    prompt = [5, 9, 2, 3, 7]
    cont = [1] * (depth + 1)  # one position studied: the pass from the prompt (later tokens are never read)
    seeds = range(1) if nodes is not None else range(300)  # a tree's expectation is exact: one study
    predicted = [study_sampled(target, EagleDrafter(draft, 16), [(prompt, cont)], [Shape(depth, nodes, topk)],
                               sampling, seed=s)[0]["per_pass"][0][0] for s in seeds]
    first: list[int] = []

    class FirstPass(EagleDrafter):
        def commit(self, verdict, scored) -> None:
            if self.cached < len(prompt):  # the first pass's commit
                first.append(len(verdict.tokens))
            super().commit(verdict, scored)

    gen = torch.Generator().manual_seed(11)
    tree = None if nodes is None else (topk, nodes)
    for _ in range(1500):
        speculative_decode(TargetScorer(target), FirstPass(draft, 16, tree), prompt, depth + 1, depth, sampling, gen)
    measured = np.array(first, dtype=float)
    assert len(measured) == 1500 and measured.max() > 1  # drafts were accepted
    pred = np.array(predicted)
    se = math.sqrt(measured.var(ddof=1) / len(measured) + (pred.var(ddof=1) / len(pred) if len(pred) > 1 else 0.0))
    z = (pred.mean() - measured.mean()) / se
    assert abs(z) < 3.29, (pred.mean(), measured.mean(), z)


def test_snapshot_and_restore_return_the_draft_to_a_position() -> None:
    """A study tries several drafts from one position: `snapshot` / `restore` bring the drafter's
    cache back (the same next draft, chain and tree), a tree shape asked for one proposal leaves
    the drafter's own shape as it was, and a drafter that keeps no such state says so."""
    from specdec.reference.core.seams import Scored
    from specdec.reference.model.kv_session import KVSession
    from specdec.reference.drafters.protocol import NoDrafter

    target = tiny_llama(vocab_size=16, seed=0, sharpness=8.0)
    drafter = EagleDrafter(random_eagle(target), 16)
    prompt = [5, 9, 2, 3, 7, 1, 4]
    session = KVSession(target)
    scored = session.start(prompt + [2], needs=drafter.needs)  # hidden states of the prompt's positions
    drafter.start(prompt + [2], Scored(scored.logits, scored.hidden[:-1]))
    saved = drafter.snapshot()
    chain = drafter.propose_shape(None, 3, GREEDY).tokens.tolist()
    tree = drafter.propose_shape((2, 5), 3, GREEDY)
    drafter.extend(scored.hidden[-1:])
    assert drafter.cached == len(prompt) and drafter.shape_tree is None
    drafter.restore(saved)
    assert drafter.cached == len(prompt) - 1
    assert drafter.propose_shape(None, 3, GREEDY).tokens.tolist() == chain
    again = drafter.propose_shape((2, 5), 3, GREEDY)
    assert again.tokens.tolist() == tree.tokens.tolist() and again.parents == tree.parents
    with pytest.raises(NotImplementedError, match="offers no snapshot"):
        NoDrafter().snapshot()
