"""The distilled draft model (`specdec.reference.draftmodel`) on tiny real Llama models.

- A draft cut with every target layer is the target (same logits); fewer layers share its
  embedding, frozen.
- Distillation lowers the held-out KL; a run interrupted after a checkpoint and resumed ends
  with exactly the weights of a run that never stopped (same seed).
- Greedy speculative output with the trained draft (chains, gamma 1..6) equals the plain
  target's greedy output, from the saved folder as `model:DIR`.
- Sampling at T = 1 with a trained draft: the joint distribution of the first 3 tokens equals
  the target's exact joint (enumerated), Pearson chi-square, significance 1e-3, 3000 fixed-seed
  decodes per gamma (as the other drafters' sampling tests).
- Bad options are refused in one line, exit 2, before any model loads.
"""
import json

import pytest
import torch
from click.testing import CliRunner

from specdec.cli import cli
from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.draftmodel import train as train_module
from specdec.reference.draftmodel.model import DraftShape, default_sources, draft_from, trained
from specdec.reference.draftmodel.train import DraftTrainConfig, evaluate, train_draft
from specdec.reference.drafters.neural import NeuralDrafter
from specdec.reference.heads.data import distill
from tests.stats_helpers import chi_square_pvalue
from tests.tiny_models import exact_joint, sampled_joint, tiny_llama

GREEDY = SamplingConfig(temperature=0.0)
VOCAB = 64


@pytest.fixture(scope="module")
def data():
    """The tiny target's own distributions over 24 windows of 16 tokens (8 held out)."""
    target = tiny_llama(VOCAB, seed=0, sharpness=8.0)
    g = torch.Generator().manual_seed(0)
    windows = torch.randint(0, VOCAB, (24, 16), generator=g).tolist()
    d = distill(target, windows, top_k=16)
    return target, d.select(torch.arange(8, 24)), d.select(torch.arange(8))


def test_draft_with_every_layer_is_the_target() -> None:
    target = tiny_llama(VOCAB, seed=0)
    full = draft_from(target, DraftShape(2, (0, 1)))
    x = torch.tensor([[3, 9, 4, 1, 22]])
    with torch.no_grad():
        assert torch.allclose(full(input_ids=x).logits, target(input_ids=x).logits, atol=1e-6)
    one = draft_from(target, DraftShape(1))
    assert one.model.embed_tokens.weight is target.model.embed_tokens.weight
    assert not one.model.embed_tokens.weight.requires_grad
    assert set(trained(one)) == {n for n, _ in one.named_parameters() if n.startswith(("model.layers", "model.norm"))}
    assert default_sources(1, 30) == (0,) and default_sources(3, 30) == (0, 1, 2)


def test_distillation_lowers_held_out_kl(data) -> None:
    target, train, held = data
    draft = draft_from(target, DraftShape(1))
    before = evaluate(draft, held)
    log = train_draft(draft, train, DraftTrainConfig(layers=1, epochs=6, batch=4, lr=5e-3, seed=0))
    after = evaluate(draft, held)
    assert log["steps"] == 24 and after["loss"] < before["loss"]


def test_resumed_training_equals_an_uninterrupted_run(data, tmp_path, monkeypatch) -> None:
    target, train, _ = data
    config = DraftTrainConfig(layers=1, epochs=2, batch=4, lr=5e-3, seed=3)
    whole = draft_from(target, DraftShape(1))
    train_draft(whole, train, config)

    saved = train_module.save_checkpoint

    def save_then_stop(*args):  # a run killed right after its checkpoint at step 3
        saved(*args)
        if args[-1] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "save_checkpoint", save_then_stop)
    path = tmp_path / "ckpt.pt"
    with pytest.raises(KeyboardInterrupt):
        train_draft(draft_from(target, DraftShape(1)), train, config, path, "k", checkpoint_seconds=0.0)
    monkeypatch.setattr(train_module, "save_checkpoint", saved)
    resumed = draft_from(target, DraftShape(1))
    log = train_draft(resumed, train, config, path, "k", checkpoint_seconds=1e9)
    assert log["resumed_at_step"] == 3
    for name, p in trained(whole).items():
        assert torch.equal(p, trained(resumed)[name]), name
    other = draft_from(target, DraftShape(1))  # another key: the checkpoint is not taken
    assert train_draft(other, train, config, path, "another", checkpoint_seconds=1e9)["resumed_at_step"] == 0


@pytest.mark.parametrize("gamma", [1, 2, 4, 6])
def test_greedy_speculative_with_the_trained_draft_equals_the_target(data, tmp_path, gamma: int) -> None:
    target, train, _ = data
    draft = draft_from(target, DraftShape(1))
    train_draft(draft, train, DraftTrainConfig(layers=1, epochs=3, batch=4, lr=5e-3))
    draft.save_pretrained(tmp_path / "draft")
    from transformers import AutoModelForCausalLM
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "draft").eval()  # what model:DIR loads
    prompt = [5, 9, 2, 33, 7]
    reference = autoregressive_decode(TargetScorer(target), prompt, 40, GREEDY, None).tokens
    result = speculative_decode(TargetScorer(target), NeuralDrafter(loaded, VOCAB), prompt, 40, gamma, GREEDY, None)
    assert result.tokens == reference
    assert result.stats.alpha() > 0  # it drafts something the target keeps


@pytest.mark.parametrize("gamma", [1, 3])
def test_sampled_output_with_the_trained_draft_follows_the_target(tmp_path, gamma: int) -> None:
    """T = 1: the speculative sampler with a distilled draft (loaded back from its saved folder,
    what model:DIR runs) draws the target's p; the draft is good enough that most runs keep drafts,
    so the test exercises acceptance and the residual, not only the bonus token."""
    vocab, n_tokens, runs = 5, 3, 3000
    target = tiny_llama(vocab, seed=0, sharpness=6.0)
    windows = torch.randint(0, vocab, (24, 16), generator=torch.Generator().manual_seed(1)).tolist()
    draft = draft_from(target, DraftShape(1))
    train_draft(draft, distill(target, windows, top_k=vocab), DraftTrainConfig(layers=1, epochs=3, batch=4, lr=5e-3))
    draft.save_pretrained(tmp_path / "draft")
    from transformers import AutoModelForCausalLM
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "draft").eval()
    sampling = SamplingConfig(temperature=1.0)
    prompt = [1, 4, 2]
    exact = exact_joint(target, prompt, n_tokens, lambda logits: sampling.probs(logits).double())
    counts, results = sampled_joint(TargetScorer(target), NeuralDrafter(loaded, vocab), prompt, n_tokens, gamma,
                                    sampling, torch.Generator().manual_seed(7), runs, vocab)
    assert sum(sum(r.stats.accepted) for r in results) > runs * 0.3  # drafts were often kept
    assert chi_square_pvalue(counts, exact.numpy()) > 1e-3


@pytest.mark.parametrize("args, option", [
    (["train", "--out", "{tmp}/d", "--layers", "2", "--source-layers", "1"], "--source-layers"),
    (["train", "--out", "{tmp}/d", "--layers", "0"], "--layers"),
    (["train", "--out", "{tmp}/d", "--source-layers", "x"], "--source-layers"),
    (["train", "--out", "{tmp}/d", "--train-temperature", "0"], "--train-temperature"),
    (["export", "{tmp}", "--out", "{tmp}/x.bin"], "--out"),
    (["export", "{tmp}", "--out", "{tmp}/x.gguf"], "DIR"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path, args, option) -> None:
    result = CliRunner().invoke(cli, ["draft", *[a.format(tmp=tmp_path) for a in args]])
    assert result.exit_code == 2, result.output
    assert option in result.output


def test_export_refuses_an_existing_file_without_force(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "x.gguf").write_bytes(b"old")
    result = CliRunner().invoke(cli, ["draft", "export", str(tmp_path / "m"), "--out", str(tmp_path / "x.gguf")])
    assert result.exit_code == 2 and "--force" in result.output
    assert (tmp_path / "x.gguf").read_bytes() == b"old"


def test_saved_folder_loads_as_a_model_with_its_card_and_is_never_half_written(data, tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    from specdec.reference.draftmodel.store import read_card, save_draft
    from tests.fakes import word_tokenizer

    target, _, _ = data
    word_tokenizer().save_pretrained(tmp_path / "target")
    draft = draft_from(target, DraftShape(1))
    out = tmp_path / "draft"
    card = save_draft(draft, tmp_path / "target", out, lambda folder: {"seen": sorted(p.name for p in folder.iterdir())})
    assert read_card(out) == card and "model.safetensors" in card["seen"] and "tokenizer.json" in card["seen"]
    loaded = AutoModelForCausalLM.from_pretrained(out).eval()
    x = torch.tensor([[3, 9, 4]])
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=x).logits, draft(input_ids=x).logits, atol=1e-6)
    with pytest.raises(FileExistsError):
        save_draft(draft, tmp_path / "target", out, lambda folder: {})
    with pytest.raises(RuntimeError):  # a card that fails: nothing replaces the published folder
        save_draft(draft, tmp_path / "target", out, lambda folder: (_ for _ in ()).throw(RuntimeError("x")), force=True)
    assert read_card(out) == card


def vocab_gguf(path, layers: int, width: int, tokens: list[str]) -> str:
    """A GGUF file holding only metadata: a Llama of `layers` x `width` with these tokens."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_embedding_length(width)
    writer.add_token_list(tokens)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return str(path)


def test_export_refuses_a_vocabulary_from_another_target(tmp_path) -> None:
    """The draft card's target (layers, width, ids) and its tokenizer.json must be the --vocab-from
    GGUF's: a same-sized vocabulary of another model is refused in one line, exit 2, before any
    tensor is read (model.safetensors here is not even a safetensors file)."""
    from specdec.reference.draftmodel.gguf_export import source_problem

    tokens = [f"t{i}" for i in range(VOCAB)]
    folder = tmp_path / "draft"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": VOCAB}))
    (folder / "model.safetensors").write_bytes(b"never read")
    (folder / "card.json").write_text(json.dumps({"format": "specdec-draft/1", "target": {
        "name": "tiny", "weights_sha256": "0" * 64, "layers": 2, "hidden_size": 32, "vocab_size": VOCAB}}))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {t: i for i, t in
                                                                                        enumerate(tokens)}}}))
    other_shape = vocab_gguf(tmp_path / "other.gguf", 4, 32, tokens)  # same ids, another model
    other_tokens = vocab_gguf(tmp_path / "swapped.gguf", 2, 32, tokens[:10] + ["x"] + tokens[11:])
    same = vocab_gguf(tmp_path / "same.gguf", 2, 32, tokens)
    for gguf_file, words in ((other_shape, "4 layers"), (other_tokens, "first difference at id 10")):
        result = CliRunner().invoke(cli, ["draft", "export", str(folder), "--out", str(tmp_path / "x.gguf"),
                                          "--vocab-from", gguf_file])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and "--vocab-from" in lines[-1] and words in lines[-1], result.output
        assert "distilled from 'tiny'" in lines[-1] or "tokenizer.json" in lines[-1]
    assert not (tmp_path / "x.gguf").exists()
    assert source_problem(folder, same) is None  # the target's own: exported as before
