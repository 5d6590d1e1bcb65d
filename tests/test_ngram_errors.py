"""Bad inputs give clear errors: SpecdecError (a ValueError) / FileNotFoundError naming the
problem, and the CLI turns them into one line."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specdec.errors import SpecdecError
from specdec.ngram.arpa import read_arpa
from specdec.ngram.build import build_model
from specdec.ngram.model import NgramModel, resolve_arpa
from specdec.ngram.tables import build_tables, load_tables
from specdec.ngram.tools import find_tool, run_build_binary, run_lmplz
from tests.cli_helpers import refuse_constant
from tests.ngram_corpus import VOCAB, require_kenlm_tools

GOOD = """\\data\\
ngram 1=5
ngram 2=2

\\1-grams:
-1.0\t<unk>\t0
0\t<s>\t-0.5
-0.5\t</s>\t0
-0.7\t7\t-0.2
-0.9\t8\t0

\\2-grams:
-0.3\t<s> 7
-0.2\t7 8

\\end\\
"""


def write(tmp_path: Path, text: str, name: str = "m.arpa") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_hand_written_arpa_parses(tmp_path) -> None:
    arpa = read_arpa(write(tmp_path, GOOD))
    assert arpa.order == 2 and arpa.counts() == [5, 2]
    model = NgramModel(build_tables(arpa), vocab_size=10, eos_id=9)
    state = model.state_for([7])
    scores = model.log10_scores(state)
    assert scores[8] == pytest.approx(-0.2)                    # explicit 2-gram
    assert scores[7] == pytest.approx(-0.2 + -0.7)             # back-off(7) + p(7)
    assert scores[3] == pytest.approx(-0.2 + -1.0)             # unseen id: <unk>


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("hello\n", "not an ARPA file"),
    (GOOD.replace("ngram 2=2", "ngram 2=3"), "declares 3 2-grams, found 2"),
    (GOOD.replace("\\end\\\n", ""), "truncated"),
    (GOOD.replace("-0.2\t7 8", "-0.2\t7 8 9"), "does not hold 2 words"),
    (GOOD.replace("-0.2\t7 8", "-0.2\t7 11"), "'11' is not among the 1-grams"),
    (GOOD.replace("-0.9\t8", "abc\t8"), "non-numeric"),
    (GOOD.replace("-0.9\t8\t0", "-0.9"), "malformed 1-gram line"),
    (GOOD.replace("\\2-grams:", "\\3-grams:"), "expected '\\2-grams:'"),
])
def test_corrupt_arpa_is_a_value_error(tmp_path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_tables(write(tmp_path, text), cache=False)


def test_arpa_word_that_is_not_a_token_id(tmp_path) -> None:
    with pytest.raises(ValueError, match="'cat' is neither a decimal token id"):
        load_tables(write(tmp_path, GOOD.replace("\t8\t", "\tcat\t").replace("7 8", "7 cat")), cache=False)


def test_missing_context_is_a_value_error(tmp_path) -> None:
    text = GOOD.replace("ngram 2=2", "ngram 2=2\nngram 3=1").replace(
        "\\end\\", "\\3-grams:\n-0.1\t8 7 8\n\n\\end\\")
    with pytest.raises(ValueError, match="3-grams have no 2-gram context"):
        load_tables(write(tmp_path, text), cache=False)


def test_missing_files_are_file_not_found(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="ARPA file .*nope.arpa not found"):
        load_tables(tmp_path / "nope.arpa")
    with pytest.raises(FileNotFoundError, match="n-gram model not found"):
        resolve_arpa(tmp_path / "no-such-model")
    with pytest.raises(FileNotFoundError, match="training text .* not found"):
        build_model(tmp_path / "none.txt", 3, tmp_path / "out", VOCAB)


def test_missing_kenlm_binary_names_it_and_the_fix(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("SPECDEC_KENLM_BIN", raising=False)
    with pytest.raises(FileNotFoundError) as err:
        find_tool("lmplz", bin_dir=tmp_path)
    assert "lmplz" in str(err.value) and "bash scripts/setup.sh" in str(err.value)
    monkeypatch.setenv("SPECDEC_KENLM_BIN", str(tmp_path / "elsewhere"))
    with pytest.raises(FileNotFoundError, match="build_binary.*elsewhere"):
        find_tool("build_binary")


def test_empty_corpus_is_a_value_error(tmp_path) -> None:
    empty = write(tmp_path, "\n\n", "empty.txt")
    with pytest.raises(ValueError, match="is empty"):
        build_model(empty, 3, tmp_path / "out", VOCAB)
    require_kenlm_tools()
    with pytest.raises(ValueError, match="is empty"):
        run_lmplz(empty, tmp_path / "x.arpa", 3)


def test_bad_corpus_words_and_ids(tmp_path) -> None:
    with pytest.raises(ValueError, match="decimal token ids"):
        build_model(write(tmp_path, "1 2 cat\n", "w.txt"), 2, tmp_path / "out", VOCAB)
    with pytest.raises(ValueError, match="token id 900, outside a vocabulary of 500"):
        build_model(write(tmp_path, "1 2 900\n", "v.txt"), 2, tmp_path / "out", VOCAB)
    with pytest.raises(ValueError, match="order must be between 1 and 5"):
        build_model(write(tmp_path, "1 2\n", "o.txt"), 6, tmp_path / "out", VOCAB)


def test_user_errors_are_specdec_errors(tmp_path) -> None:
    """What the user can fix, in ngram/ and reference/data/, is a SpecdecError."""
    from specdec.reference.data.aligned_corpus import AlignedConfig
    from specdec.reference.data.corpus import eval_prompts
    from specdec.reference.data.rdata import unserialize

    with pytest.raises(SpecdecError, match="not an ARPA file"):
        read_arpa(write(tmp_path, "hello\n"))
    with pytest.raises(SpecdecError, match="'cat' is neither a decimal token id"):
        load_tables(write(tmp_path, GOOD.replace("\t8\t", "\tcat\t").replace("7 8", "7 cat")), cache=False)
    with pytest.raises(SpecdecError, match="outside a vocabulary of 5"):
        NgramModel(build_tables(read_arpa(write(tmp_path, GOOD))), vocab_size=5)
    with pytest.raises(SpecdecError, match="order must be between 1 and 5"):
        build_model(write(tmp_path, "1 2\n", "o.txt"), 6, tmp_path / "out", VOCAB)
    with pytest.raises(SpecdecError, match="sizes must be >= 1"):
        AlignedConfig(tokens=0)
    with pytest.raises(SpecdecError, match="min_tokens >= 1"):
        eval_prompts(1, 0)
    with pytest.raises(SpecdecError, match="not an XDR"):
        unserialize(b"??")


def test_failed_build_binary_writes_nothing(tmp_path) -> None:
    require_kenlm_tools()
    arpa = write(tmp_path, "hello\n")
    with pytest.raises(SpecdecError, match="build_binary failed"):
        run_build_binary(arpa, tmp_path / "m.binary")
    assert [p.name for p in tmp_path.iterdir()] == ["m.arpa"]


def test_tiny_corpus_needs_and_gets_discount_fallback(tmp_path) -> None:
    require_kenlm_tools()
    text = write(tmp_path, "1 2 3 4\n1 2 3 5\n", "tiny.txt")
    with pytest.raises(ValueError, match="lmplz failed.*discount"):
        run_lmplz(text, tmp_path / "a.arpa", 3, memory="100M", discount_fallback=False)
    result = run_lmplz(text, tmp_path / "b.arpa", 3, memory="100M")  # automatic retry
    assert result.discount_fallback and result.arpa.is_file()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specdec", *args], capture_output=True, text=True)


def test_cli_build_from_text_prints_json(tmp_path, corpus_file) -> None:
    require_kenlm_tools()
    out = tmp_path / "cli-model"
    proc = run_cli("ngram", "build", "--order", "3", "--text", str(corpus_file), "--vocab-size", str(VOCAB),
                   "--eos-id", "499", "--memory", "200M", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout, parse_constant=refuse_constant)
    assert report["order"] == 3 and len(report["counts"]) == 3 and report["counts"][2] > 0
    assert (out / "model.binary").is_file() and (out / "model.arpa.tables.npz").is_file()
    assert json.loads((out / "model.json").read_text())["eos_id"] == 499


def test_cli_errors_are_one_line(tmp_path, corpus_file) -> None:
    proc = run_cli("ngram", "build", "--order", "3", "--text", str(tmp_path / "missing.txt"),
                   "--vocab-size", "10", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2  # issue 53: a --text problem is the option's (it was exit 1)
    assert proc.stderr.strip().startswith("Error: Invalid value for --text: training text")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("ngram", "build", "--order", "3", "--text", str(corpus_file), "--vocab-size", "100",
                   "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "outside a vocabulary of 100" in proc.stderr and "--text" in proc.stderr
    bad = tmp_path / "words.txt"
    bad.write_text("a b c\n")
    proc = run_cli("ngram", "build", "--order", "3", "--text", str(bad), "--vocab-size", "100",
                   "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "decimal token ids" in proc.stderr and not (tmp_path / "o").exists()
    proc = run_cli("ngram", "build", "--order", "9", "--text", str(corpus_file), "--vocab-size", "500",
                   "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "'--order': must be in [1, 5], got 9" in proc.stderr


def test_corrupt_cache_is_rebuilt(tiny_models, tmp_path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(tiny_models[2], folder)
    npz = folder / "model.arpa.tables.npz"
    npz.write_bytes(b"not a zip file")
    tables = load_tables(folder / "model.arpa")  # falls back to parsing the ARPA file
    assert tables.order == 2
