"""The drafter spec of the command line, parsed without importing torch (so --help is fast).

    none                    no drafter: plain autoregressive decoding
    lookup[:N[:earliest|latest]]  prompt lookup, longest suffix n-gram up to N tokens (default 3),
                            its latest earlier occurrence (`:earliest`: the first one, HF's rule)
    ngram:PATH              KenLM n-gram model over the target's token ids (ARPA or its folder)
    model:PATH              neural draft model: a local Hugging Face causal LM folder (same vocabulary)
    heads:PATH              blockwise parallel heads on the target (`specdec heads train`), fed by its passes
"""
from __future__ import annotations

from dataclasses import dataclass

SPEC_HELP = ("none | lookup[:N[:earliest|latest]] (prompt lookup) | ngram:PATH (KenLM) | model:PATH (HF causal LM "
             "folder) | heads:PATH (heads on the target)")
KINDS = ("none", "lookup", "ngram", "model", "heads")
PATH_KINDS = ("ngram", "model", "heads")


@dataclass(frozen=True)
class DrafterSpec:
    kind: str  # one of KINDS
    arg: str | None = None

    @classmethod
    def parse(cls, spec: str) -> "DrafterSpec":
        kind, _, arg = spec.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown drafter {spec!r}: expected {SPEC_HELP}")
        if kind in PATH_KINDS and not arg:
            raise ValueError(f"drafter {kind!r} needs a path: {kind}:PATH")
        if kind == "lookup":
            lookup_args(arg)  # validates
        return cls(kind, arg or None)


def lookup_args(arg: str | None) -> tuple[int, str]:
    """`N[:earliest|latest]` (default 3, latest) -> (max_ngram, match)."""
    n, _, match = (arg or "3").partition(":")
    if not (n.isdigit() and int(n) >= 1) or match not in ("", "latest", "earliest"):
        raise ValueError(f"lookup[:N[:earliest|latest]] needs a positive integer N, got {arg!r}")
    return int(n), match or "latest"
