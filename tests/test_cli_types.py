"""The command line's parameter types (specdec/cli/types.py) and its one option vocabulary:

- numbers: ints and finite floats in an interval, the message naming the interval and the value;
- lists: numbers, integers, distinct, strictly increasing, empty allowed or not;
- drafter specs: the grammar and the files it names, with an optional LABEL=;
- renamed options: the old spelling parses and names the option in errors, --help shows the
  new one only (`--new-tokens` / `--max-new-tokens` on decode, bild and ngram build; bild's
  `--prompts` / `--heldout`).
"""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from specdec.cli.types import DrafterSpecType, Number, NumberList, Renamed


def convert(kind: click.ParamType, value):
    return kind.convert(value, None, None)


def fails(kind: click.ParamType, value, message: str) -> None:
    with pytest.raises(click.BadParameter, match=message):
        convert(kind, value)


def test_numbers() -> None:
    assert convert(Number(int, 1), "3") == 3 and convert(Number(float, 0, 1, low_open=True), "1") == 1.0
    fails(Number(int, 1), "0", r"must be in \[1, inf\), got 0")
    fails(Number(int, 1), "x", "not a valid integer")
    fails(Number(float, 0, 1, low_open=True), "0", r"finite and in \(0, 1\], got 0")
    for bad in ("nan", "inf", "-inf"):
        fails(Number(float, 0), bad, "finite")


def test_number_lists() -> None:
    assert convert(NumberList(), "1,0.5, 0.3") == (1.0, 0.5, 0.3)
    assert convert(NumberList(int, 1, 64, distinct=True), "1,2,4") == (1, 2, 4)
    assert convert(NumberList(int, 1, empty_ok=True), " ") == ()
    fails(NumberList(), "", "at least one number")
    fails(NumberList(), "1,x", "comma-separated numbers")
    fails(NumberList(), "1,nan", "finite")
    fails(NumberList(int, 1, 64), "1,2.5", "integers")
    fails(NumberList(int, 1, 64), "0", r"in \[1, 64\]")
    fails(NumberList(int, 1, 64, distinct=True, what="gammas"), "1,1", "gammas must be distinct")
    fails(NumberList(int, 1, 256, increasing=True, what="batch sizes"), "4,2", "strictly increasing")
    fails(NumberList(float, 0, 1, low_open=True), "0,1", r"in \(0, 1\]")


def test_drafter_specs(tmp_path) -> None:
    assert convert(DrafterSpecType(), "lookup:2:earliest") == "lookup:2:earliest"
    assert convert(DrafterSpecType(labelled=True), "fast=lookup") == ("fast", "lookup")
    fails(DrafterSpecType(labelled=True), f"model:{tmp_path}", "not a Hugging Face model folder")
    (tmp_path / "config.json").write_text("{}")
    assert convert(DrafterSpecType(labelled=True), f"model:{tmp_path}") == (f"model:{tmp_path}", f"model:{tmp_path}")
    fails(DrafterSpecType(), "beam:3", "unknown drafter")
    fails(DrafterSpecType(), "ngram:/nonexistent/model", "no such file or folder")
    (tmp_path / "lm.binary").write_bytes(b"not kenlm")  # a KenLM binary needs its ARPA file beside it
    fails(DrafterSpecType(), f"ngram:{tmp_path / 'lm.binary'}", "no ARPA file")
    fails(DrafterSpecType(), f"heads:{tmp_path}", "holds no heads")


def test_renamed_option_parses_the_old_spelling_and_hides_it() -> None:
    @click.command()
    @click.option("--new-tokens", "new_tokens", cls=Renamed, old=("--max-new-tokens",), type=Number(int, 1),
                  default=4, help="tokens")
    def command(new_tokens):
        click.echo(new_tokens)

    runner = CliRunner()
    assert runner.invoke(command, ["--max-new-tokens", "7"]).output == "7\n"
    assert runner.invoke(command, ["--new-tokens", "8"]).output == "8\n"
    help_text = runner.invoke(command, ["--help"]).output
    assert "--new-tokens" in help_text and "--max-new-tokens" not in help_text
    error = runner.invoke(command, ["--max-new-tokens", "0"]).output
    assert "'--new-tokens' / '--max-new-tokens'" in error


@pytest.mark.parametrize("command, new, old", [(["decode"], "--new-tokens", "--max-new-tokens"),
                                                (["bild"], "--new-tokens", "--max-new-tokens"),
                                                (["bild"], "--prompts", "--heldout"),
                                                (["ngram", "build"], "--new-tokens", "--max-new-tokens")])
def test_one_vocabulary_across_commands(command, new, old) -> None:
    from specdec.cli import cli

    help_text = CliRunner().invoke(cli, [*command, "--help"]).output
    assert new in help_text and old not in help_text


@pytest.mark.parametrize("spec, words", [("lookup:99999999999999999999", "1 .. 64"), ("lookup:0", "1 .. 64"),
                                         ("heads:x,w=nan", "finite w"), ("heads:x,w=inf", "finite w"),
                                         ("heads:x,k=100000000000", "1 .. 1024")])
def test_drafter_spec_values_are_bounded(spec, words) -> None:
    """A runaway lookup length or a non-finite weight is refused by the grammar itself (issue 28:
    lookup:10^20 used to allocate one index table per length until the kernel killed it)."""
    from specdec.errors import SpecdecError
    from specdec.reference.drafters.spec import heads_args, lookup_args

    with pytest.raises(SpecdecError, match=words.replace(".", r"\.")):
        kind, _, arg = spec.partition(":")
        lookup_args(arg) if kind == "lookup" else heads_args(arg)
