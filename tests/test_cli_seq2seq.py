"""Every model-taking command on tiny encoder-decoder folders (T5 text-to-text, Whisper features),
and the one-line refusals that come before any model loads."""
import json

import numpy as np
import pytest

from tests.cli_helpers import run_main, strict_json
from tests.tiny_models import save_tiny_model
from tests.tiny_seq2seq import FRAMES, MEL_BINS, save_tiny_seq2seq

PROMPT = "w1 w2 w3 w4 w1 w2"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq2seq")
    rng = np.random.default_rng(0)
    np.save(root / "one.npy", rng.standard_normal((MEL_BINS, FRAMES)).astype(np.float32))
    np.save(root / "three.npy", rng.standard_normal((3, MEL_BINS, FRAMES)).astype(np.float32))
    np.save(root / "wrong.npy", rng.standard_normal((MEL_BINS + 1, FRAMES)).astype(np.float32))
    np.save(root / "nan.npy", np.full((MEL_BINS, FRAMES), np.nan, dtype=np.float32))
    return {"t5": save_tiny_seq2seq(root / "t5", "t5", seed=0), "t5d": save_tiny_seq2seq(root / "t5d", "t5", seed=1),
            "wh": save_tiny_seq2seq(root / "wh", "whisper", seed=0),
            "whd": save_tiny_seq2seq(root / "whd", "whisper", seed=1),
            "llama": save_tiny_model(root / "llama"), "root": root}


def test_decode_text_pair_equals_its_baseline(folders, capsys) -> None:
    code, out, err = run_main(capsys, ["decode", "--target", str(folders["t5"]), "--drafter", f"model:{folders['t5d']}",
                                       "--prompt", PROMPT, "--new-tokens", "12", "--ignore-eos", "--baseline", "--json"])
    assert code == 0, err
    report = strict_json(out)
    assert report["baseline"]["same_tokens"] is True and report["stats"]["new_tokens"] == 12


def test_decode_feature_pair_from_a_npy_file(folders, capsys) -> None:
    code, out, err = run_main(capsys, ["decode", "--target", str(folders["wh"]), "--drafter",
                                       f"model:{folders['whd']}", "--encoder-inputs", str(folders["root"] / "one.npy"),
                                       "--new-tokens", "10", "--ignore-eos", "--baseline", "--json"])
    assert code == 0, err
    assert strict_json(out)["baseline"]["same_tokens"] is True


def test_estimate_and_bild_on_a_text_pair(folders, capsys) -> None:
    code, out, err = run_main(capsys, ["estimate", "--target", str(folders["t5"]), "--drafter", "lookup",
                                       "--tokens", "64", "--new-tokens", "16", "--max-k", "3", "--timing-repeats", "1",
                                       "--bootstrap", "50", "--json"])
    assert code == 0, err
    report = strict_json(out)
    assert 0 <= report["alpha"] <= 1 and report["c"] >= 0 and len(report["verify_cost"]) == 3
    assert report["context"] == 1 + 16 // 2  # the decoder's context: its start token + half the continuation
    code, out, err = run_main(capsys, ["bild", "--target", str(folders["t5"]), "--drafter", f"model:{folders['t5d']}",
                                       "--prompts", "2", "--new-tokens", "8", "--json"])
    assert code == 0, err
    assert [r["label"] for r in strict_json(out)["rows"]][0] == "autoregressive"


def test_validate_on_feature_inputs(folders, capsys, tmp_path) -> None:
    code, out, err = run_main(capsys, ["validate", "--target", str(folders["wh"]), "--drafter",
                                       f"d=model:{folders['whd']}", "--encoder-inputs",
                                       str(folders["root"] / "three.npy"), "--gammas", "1,2", "--prompts", "2",
                                       "--new-tokens", "8", "--repeats", "1", "--alpha-tokens", "24",
                                       "--alpha-new-tokens", "8", "--max-k", "3", "--timing-repeats", "1",
                                       "--retries", "0", "--out", str(tmp_path), "--no-figures", "--json"])
    assert code == 0, err
    saved = json.loads((tmp_path / "validation.json").read_text())
    rows = saved["rows"]
    assert sorted((r["gamma"], r["temperature"]) for r in rows) == [(1, 0.0), (1, 1.0), (2, 0.0), (2, 1.0)]
    assert all(r["measured"] > 0 and r["extended"] > 0 and 0 <= r["alpha_estimate"] <= 1 for r in rows)
    assert saved["prompt_set"]["categories"]["features"]["prompts"] == 3


@pytest.mark.parametrize("args, option, words", [
    (["decode", "--target", "{t5}", "--drafter", "model:{llama}", "--prompt", "w1"], "--drafter", "same kind"),
    (["decode", "--target", "{llama}", "--drafter", "model:{t5}", "--prompt", "w1"], "--drafter", "same kind"),
    (["decode", "--target", "{wh}", "--drafter", "model:{t5d}", "--encoder-inputs", "{root}/one.npy"], "--drafter",
     "different inputs"),
    (["decode", "--target", "{wh}", "--drafter", "lookup", "--prompt", "w1"], "--encoder-inputs", "reads features"),
    (["decode", "--target", "{t5}", "--drafter", "lookup", "--encoder-inputs", "{root}/one.npy"], "--encoder-inputs",
     "text prompts"),
    (["decode", "--target", "{wh}", "--drafter", "lookup", "--encoder-inputs", "{root}/three.npy"],
     "--encoder-inputs", "one example"),
    (["decode", "--target", "{wh}", "--drafter", "lookup", "--encoder-inputs", "{root}/wrong.npy"],
     "--encoder-inputs", "num_mel_bins"),
    (["decode", "--target", "{wh}", "--drafter", "lookup", "--encoder-inputs", "{root}/nan.npy"],
     "--encoder-inputs", "NaN"),
    (["decode", "--target", "{wh}", "--drafter", "lookup", "--encoder-inputs", "{root}/missing.npy"],
     "--encoder-inputs", "not a file"),
    (["heads", "train", "--target", "{t5}", "--out", "{root}/heads"], "--target", "needs a causal LM"),
    (["eagle", "train", "--target", "{t5}", "--out", "{root}/eagle"], "--target", "needs a causal LM"),
    (["serve-bench", "--target", "{t5}", "--drafter", "lookup"], "--target", "needs a causal LM"),
    (["estimate", "--target", "{t5}", "--drafter", "lookup", "--batch-sizes", "1,2"], "--batch-sizes",
     "encoder-decoder"),
    (["estimate", "--target", "{wh}", "--drafter", "lookup", "--encoder-inputs", "{root}/three.npy", "--workload",
      "code"], "--encoder-inputs", "without"),
])
def test_refused_in_one_line_before_loading(folders, capsys, args, option, words) -> None:
    code, out, err = run_main(capsys, [a.format(**folders) for a in args])
    assert code == 2 and option in err and words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("spec", ["heads:/nowhere", "eagle:/nowhere"])
def test_learned_drafters_are_refused_on_encoder_decoder_targets(spec) -> None:
    from specdec.errors import SpecdecError
    from specdec.reference.drafters.factory import check_kind
    from specdec.reference.drafters.spec import DrafterSpec

    with pytest.raises(SpecdecError, match="trained on causal targets"):
        check_kind(DrafterSpec.parse(spec), "t5-folder", True)
    check_kind(DrafterSpec.parse(spec), "llama-folder", False)  # a causal target: no objection here


def test_byte_level_tokenizer_folder_needs_no_vocabulary_file(tmp_path, capsys) -> None:
    """A ByT5-style folder (tokenizer_config.json, no vocabulary file) is a model folder."""
    from transformers import ByT5Tokenizer

    from tests.tiny_seq2seq import tiny_t5

    tiny_t5(vocab_size=384).save_pretrained(tmp_path / "byt5")
    ByT5Tokenizer().save_pretrained(tmp_path / "byt5")
    assert not any((tmp_path / "byt5" / name).exists() for name in ("tokenizer.json", "vocab.json", "spiece.model"))
    code, out, err = run_main(capsys, ["decode", "--target", str(tmp_path / "byt5"), "--drafter", "lookup",
                                       "--prompt", "abcabc", "--new-tokens", "6", "--ignore-eos", "--json"])
    assert code == 0, err
    assert len(strict_json(out)["tokens"]) == 6
