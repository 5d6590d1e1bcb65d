"""Build a drafter from a short command-line spec.

    none          no drafter: plain autoregressive decoding
    lookup[:N[:earliest]]  prompt lookup, longest suffix n-gram up to N tokens (default 3),
                  its latest earlier occurrence (`:earliest`: the first one, HF's rule)
    ngram:PATH    KenLM n-gram model over the target's token ids (ARPA or its folder)
    model:PATH    neural draft model: a local Hugging Face causal LM folder (same vocabulary)
"""
from __future__ import annotations

from dataclasses import dataclass

from reference.drafter import Drafter
from reference.models import LoadedModel, check_pair, load_model

from specdec.drafter_help import SPEC_HELP  # noqa: F401  (one text for CLI and errors)


@dataclass
class DrafterSpec:
    kind: str  # "none", "lookup", "ngram", "model"
    arg: str | None = None

    @classmethod
    def parse(cls, spec: str) -> "DrafterSpec":
        kind, _, arg = spec.partition(":")
        if kind not in ("none", "lookup", "ngram", "model"):
            raise ValueError(f"unknown drafter {spec!r}: expected {SPEC_HELP}")
        if kind in ("ngram", "model") and not arg:
            raise ValueError(f"drafter {kind!r} needs a path: {kind}:PATH")
        if kind == "lookup":
            lookup_args(arg)  # validates
        return cls(kind, arg or None)


def lookup_args(arg: str | None) -> tuple[int, str]:
    """`N[:earliest|latest]` (default 3, latest) -> (max_ngram, match)."""
    n, _, match = (arg or "3").partition(":")
    if not (n.isdigit() and int(n) >= 1) or match not in ("", "latest", "earliest"):
        raise ValueError(f"lookup:N[:earliest|latest] needs a positive integer N, got {arg!r}")
    return int(n), match or "latest"


def make_drafter(spec: str, target: LoadedModel, device: str = "cpu", dtype: str = "float32"
                 ) -> tuple[Drafter | None, str | None]:
    """Return (drafter, note); note says e.g. how vocabularies were reconciled."""
    s = DrafterSpec.parse(spec)
    if s.kind == "none":
        return None, None
    if s.kind == "lookup":
        from reference.prompt_lookup import PromptLookupDrafter
        n, match = lookup_args(s.arg)
        return PromptLookupDrafter(max_ngram=n, match=match), None
    if s.kind == "ngram":
        from reference.ngram_drafter import NgramDrafter
        return NgramDrafter(s.arg, vocab_size=target.vocab_size), None
    from reference.neural_drafter import NeuralDrafter
    draft = load_model(s.arg, device=device, dtype=dtype)
    note = check_pair(target, draft)
    return NeuralDrafter(draft.model, vocab_size=target.vocab_size), note
