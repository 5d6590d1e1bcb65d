"""A drafter kind is one module and one registry line (docs/architecture.md, "Adding a drafter"):
a toy module added at run time with `DRAFTER_KINDS[...] = DrafterKind(...)` is parsed, refused
with the grammar's help, built by the factory and run by the real `specdec decode`, whose greedy
output stays the target's."""
from __future__ import annotations

import importlib
import json

import pytest
from click.testing import CliRunner

from specdec.cli import cli
from specdec.errors import SpecdecError
from specdec.reference.drafters import spec as specs
from specdec.reference.drafters.spec import DrafterKind, DrafterSpec
from tests.tiny_models import save_tiny_model
from tests.toy_modules import import_toy

TOY = '''
import torch

from specdec.reference.core.seams import Proposal
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.drafters.spec import whole
from specdec.errors import SpecdecError


class Repeat(DrafterBase):
    """Proposes the last token again, up to n times (deterministic: q is one-hot)."""

    deterministic = True

    def __init__(self, n: int) -> None:
        self.n, self.tokens = n, []

    def start(self, prompt, prefill=None) -> None:
        self.tokens = list(prompt)

    def propose(self, gamma, sampling, generator, keep_going=None) -> Proposal:
        return Proposal(torch.tensor([self.tokens[-1]] * min(gamma, self.n), dtype=torch.long), None)

    def commit(self, verdict, scored) -> None:
        self.tokens += verdict.tokens.tolist()


def check(arg):
    if arg and whole(arg, 1, 16) is None:  # "repeat" alone: the default
        raise SpecdecError(f"repeat[:N] needs N in 1 .. 16, got {arg!r}")


def build_drafter(arg, target, **place):
    return Repeat(int(arg or 2)), "repeats the last token"
'''


@pytest.fixture
def toy_kind(tmp_path, monkeypatch) -> None:
    module = import_toy(tmp_path, "toy_drafter", TOY, monkeypatch)
    monkeypatch.setitem(specs.DRAFTER_KINDS, "repeat",  # the one line
                        DrafterKind("toy_drafter", "repeat[:N] (the last token again)", check=module.check))


def test_the_grammar_reads_the_registry(toy_kind) -> None:
    assert DrafterSpec.parse("repeat:3") == DrafterSpec("repeat", "3") and DrafterSpec.parse("repeat").paths == []
    with pytest.raises(SpecdecError, match=r"^repeat\[:N\] needs N in 1 \.\. 16, got 'x'$"):
        DrafterSpec.parse("repeat:x")
    with pytest.raises(SpecdecError, match=r"repeat\[:N\] \(the last token again\)$"):
        DrafterSpec.parse("beam:4")  # the refusal lists every registered kind


def test_the_real_decode_runs_a_toy_kind_and_stays_exact(toy_kind, tmp_path) -> None:
    target = save_tiny_model(tmp_path / "target", seed=0)
    result = CliRunner().invoke(cli, ["decode", "--prompt", "w1 w1 w1 w2 w2 w2 w3", "--target", str(target),
                                      "--drafter", "repeat:3", "--gamma", "4", "--max-new-tokens", "24",
                                      "--ignore-eos", "--baseline", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["baseline"]["same_tokens"] is True and len(out["tokens"]) == 24
    hist = out["stats"]["proposed_hist"]
    assert sum(hist[1:]) > 0 and hist[4] == 0  # it drafted, never more than its n = 3


def test_the_built_in_kinds_are_registry_lines() -> None:
    assert list(specs.DRAFTER_KINDS) == ["none", "lookup", "ngram", "model", "heads", "eagle", "llamacpp"]
    for name, kind in specs.DRAFTER_KINDS.items():
        assert callable(importlib.import_module(kind.module).build_drafter), name
    assert specs.SPEC_HELP == specs.spec_help()


def test_a_kinds_files_and_preflight_come_from_its_line(tmp_path, monkeypatch) -> None:
    """What a spec names and how its files are checked are the kind's (no branch on kind names):
    a toy kind reading two files, one a KenLM model, is refused by every command's drafter
    option through its own preflight, in one line, before any model loads."""
    def files(arg):
        first, second = arg.split("+")
        return specs.SpecFiles((first, second), ngrams=(second,), tree=True)

    def preflight(arg):
        raise SpecdecError(f"pair:{arg}: the pair disagrees")

    monkeypatch.setitem(specs.DRAFTER_KINDS, "pair", DrafterKind("toy_pair", "pair:A+B", needs_path=True, files=files,
                                                                 preflight=preflight))
    spec = DrafterSpec.parse("pair:a+b")
    assert (spec.paths, spec.ngram_paths, spec.model_paths, spec.tree) == (["a", "b"], ["b"], [], True)
    assert DrafterSpec.parse("model:m").model_paths == ["m"] and DrafterSpec.parse("ngram:n").ngram_paths == ["n"]
    assert DrafterSpec.parse("eagle:e,tree=8").tree and not DrafterSpec.parse("heads:h").tree
    first = tmp_path / "a"
    first.mkdir()
    result = CliRunner().invoke(cli, ["decode", "--prompt", "w1", "--target", str(tmp_path), "--drafter",
                                      f"pair:{first}+{tmp_path / 'nothing'}"])
    assert result.exit_code == 2 and "no such file or folder" in result.output
    (tmp_path / "b.arpa").write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t5\n\n\\end\\\n")
    result = CliRunner().invoke(cli, ["decode", "--prompt", "w1", "--target", str(tmp_path), "--drafter",
                                      f"pair:{first}+{tmp_path / 'b.arpa'}"])
    assert result.exit_code == 2 and "the pair disagrees" in result.output and "Traceback" not in result.output
