"""The project's own calls raise no deprecation warning (DeprecationWarning,
PendingDeprecationWarning, FutureWarning): a call that a library has deprecated works today and
breaks on the release that removes it (transformers 5.24 warned on every decode step that
`past_key_values` goes in 5.40). The whole suite turns these warnings into errors too
(pyproject's `filterwarnings`); this module states the promise on its own, over every path that
hands a KV cache to a model: decode (causal LM and encoder-decoder), estimate (target samples,
teacher-forced passes, timed passes) and the ragged batch of serve-bench."""
from __future__ import annotations

import warnings

import pytest

from tests.cli_helpers import run_main
from tests.tiny_seq2seq import save_tiny_seq2seq

DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def run_strict(capsys, argv: list[str]) -> None:
    """Run one command with every deprecation warning raised as an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        for category in DEPRECATIONS:
            warnings.simplefilter("error", category)
        code, _, err = run_main(capsys, argv)
    assert code == 0, err
    assert "Warning" not in err, err


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    root = tmp_path_factory.mktemp("deprecations")
    return save_tiny_seq2seq(root / "t5", "t5", seed=0), save_tiny_seq2seq(root / "t5d", "t5", seed=1)


def test_decode_causal_lm(tiny_pair, capsys) -> None:
    run_strict(capsys, ["decode", "--target", str(tiny_pair.target), "--drafter", f"model:{tiny_pair.draft}",
                        "--prompt", "w1 w2 w3 w1 w2", "--new-tokens", "8", "--ignore-eos", "--baseline", "--json"])


def test_decode_sampled_with_lookup(tiny_pair, capsys) -> None:
    run_strict(capsys, ["decode", "--target", str(tiny_pair.target), "--drafter", "lookup", "--temperature", "1",
                        "--prompt", "w1 w2 w3 w1 w2", "--new-tokens", "8", "--ignore-eos", "--json"])


def test_estimate_samples_alpha_and_timing(tiny_pair, capsys) -> None:
    run_strict(capsys, ["estimate", "--target", str(tiny_pair.target), "--drafter", f"model:{tiny_pair.draft}",
                        "--prompts-file", str(tiny_pair.prompts), "--tokens", "32", "--new-tokens", "8", "--max-k", "3",
                        "--timing-repeats", "1", "--bootstrap", "20", "--json"])


def test_decode_and_estimate_encoder_decoder(t5, capsys) -> None:
    target, draft = t5
    run_strict(capsys, ["decode", "--target", str(target), "--drafter", f"model:{draft}", "--prompt", "w1 w2 w3",
                        "--new-tokens", "6", "--ignore-eos", "--baseline", "--json"])
    run_strict(capsys, ["estimate", "--target", str(target), "--drafter", "lookup", "--tokens", "32",
                        "--new-tokens", "8", "--max-k", "2", "--timing-repeats", "1", "--bootstrap", "20", "--json"])


def test_serve_bench_ragged_batch(tiny_pair, capsys, tmp_path) -> None:
    run_strict(capsys, ["serve-bench", "--target", str(tiny_pair.target), "--drafter", "lookup:2", "--gammas", "2",
                        "--batch-sizes", "1,2", "--contexts", "8", "--new-tokens", "4", "--prompts", "2",
                        "--timing-repeats", "1", "--out", str(tmp_path / "serve"), "--json"])


def test_the_cache_goes_by_the_name_the_model_takes() -> None:
    """`with_cache` names the cache argument as the model's forward does (`cache` from the
    transformers release that renamed it, `past_key_values` before)."""
    import inspect

    from specdec.reference.model.seq2seq import with_cache
    from tests.tiny_models import tiny_llama

    model = tiny_llama(8)
    kwargs = with_cache(model, "CACHE")
    (name,) = [k for k in kwargs if k != "use_cache"]
    assert name in inspect.signature(type(model).forward).parameters and kwargs["use_cache"] is True

    class OldStyle:
        def forward(self, input_ids, past_key_values=None, use_cache=None):
            pass

    class Wrapper:  # forwards **kwargs to a transformers model (tests/fakes.py's MaskedLM, adapters)
        def forward(self, **kwargs):
            pass

    assert "past_key_values" in with_cache(OldStyle(), "CACHE")
    assert name in with_cache(Wrapper(), "CACHE")
