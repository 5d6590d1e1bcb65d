"""The drafter spec of the command line, parsed without importing torch (so --help is fast).

    none                    no drafter: plain autoregressive decoding
    lookup[:N[:earliest|latest]]  prompt lookup, longest suffix n-gram up to N tokens (default 3),
                            its latest earlier occurrence (`:earliest`: the first one, HF's rule)
    ngram:PATH              KenLM n-gram model over the target's token ids (ARPA or its folder)
    model:PATH              neural draft model: a local Hugging Face causal LM folder or a .gguf file
                            (same vocabulary)
    heads:PATH[,k=K,p=P,ngram=PATH|lm=PATH,w=W,rescore=global|local]
                            blockwise parallel heads on the target (`specdec heads train`), fed by its
                            passes; with p > 1 (or a rescorer) the p best paths of their top-k lattice,
                            n-gram rescored with weight w, verified together (temperature 0);
                            rescore=local: the paper's local rescoring (one path, chosen left to right),
                            with the n-gram or an HF causal LM (folder or .gguf) of the same
                            vocabulary (lm=PATH)
    eagle:PATH[,tree=N[,topk=K]][,weights=auto|fp32|bf16]
                            feature draft on the target (EAGLE, `specdec eagle train`), fed by its
                            passes; chains, or with tree=N EAGLE-2's dynamic trees of N nodes grown
                            from the topk (default 4) best candidates per depth (any temperature);
                            weights=bf16: its matrices rounded to bfloat16 and drafted with the fast
                            kernel's bfloat16 panels (CPU; half the bytes a drafted token reads);
                            auto (default): bf16 where the target runs the fast backend, else fp32
"""
from __future__ import annotations

import math

from dataclasses import dataclass

from specdec.errors import SpecdecError

SPEC_HELP = ("none | lookup[:N[:earliest|latest]] (prompt lookup) | ngram:PATH (KenLM) | model:PATH (HF causal LM "
             "folder or .gguf file) | heads:PATH (heads on the target) | eagle:PATH[,tree=N,topk=K,weights=W] "
             "(feature draft on the target)")
KINDS = ("none", "lookup", "ngram", "model", "heads", "eagle")
PATH_KINDS = ("ngram", "model", "heads", "eagle")


@dataclass(frozen=True)
class DrafterSpec:
    kind: str  # one of KINDS
    arg: str | None = None

    @classmethod
    def parse(cls, spec: str) -> "DrafterSpec":
        kind, _, arg = spec.partition(":")
        if kind not in KINDS:
            raise SpecdecError(f"unknown drafter {spec!r}: expected {SPEC_HELP}")
        if kind in PATH_KINDS and not arg:
            raise SpecdecError(f"drafter {kind!r} needs a path: {kind}:PATH")
        if kind == "lookup":
            lookup_args(arg)  # validates
        if kind == "heads":
            heads_args(arg)  # validates
        if kind == "eagle":
            eagle_args(arg)  # validates
        return cls(kind, arg or None)

    @property
    def tree(self) -> bool:
        """Whether the drafter proposes token trees (a heads lattice: heads with options; a feature
        draft with tree=N); the drafter object says so too (`Drafter.tree`)."""
        if self.kind == "eagle":
            return eagle_args(self.arg)[1] is not None
        return self.kind == "heads" and bool(heads_args(self.arg)[1])

    @property
    def model_paths(self) -> list[str]:
        """The causal LMs the spec names (model:PATH, heads' lm=PATH): folders or .gguf files."""
        if self.kind == "heads":
            return [path for key, path in heads_args(self.arg)[1].items() if key == "lm"]
        return [self.arg] if self.kind == "model" else []

    @property
    def ngram_paths(self) -> list[str]:
        """The KenLM models the spec names (ngram:PATH, heads' ngram=PATH)."""
        if self.kind == "heads":
            return [path for key, path in heads_args(self.arg)[1].items() if key == "ngram"]
        return [self.arg] if self.kind == "ngram" else []

    @property
    def paths(self) -> list[str]:
        """The files or folders the spec names (checked to exist before any model loads)."""
        if self.kind == "heads":
            path, options = heads_args(self.arg)
            return [path] + [options[key] for key in ("ngram", "lm") if key in options]
        if self.kind == "eagle":
            return [eagle_args(self.arg)[0]]
        return [self.arg] if self.kind in PATH_KINDS else []


def split_label(spec: str) -> tuple[str, str]:
    """"bigram=ngram:PATH" -> ("bigram", "ngram:PATH"); a plain spec is its own label."""
    label, sep, rest = spec.partition("=")
    if sep and label and not any(ch in label for ch in ":/\\"):
        return label, rest
    return spec, spec


MAX_LOOKUP_NGRAM = 64  # the longest suffix prompt lookup matches (one index table per length)


def lookup_args(arg: str | None) -> tuple[int, str]:
    """`N[:earliest|latest]` (default 3, latest) -> (max_ngram, match)."""
    n, _, match = (arg or "3").partition(":")
    if not (n.isdigit() and len(n) <= 3 and 1 <= int(n) <= MAX_LOOKUP_NGRAM) or match not in ("", "latest", "earliest"):
        raise SpecdecError(f"lookup[:N[:earliest|latest]] needs an integer N in 1 .. {MAX_LOOKUP_NGRAM}, got {arg!r}")
    return int(n), match or "latest"


HEADS_OPTIONS = {"k": int, "p": int, "w": float, "ngram": str, "lm": str, "rescore": str}
HEADS_USAGE = "k=K, p=P, ngram=PATH, lm=PATH, w=W, rescore=global|local"


def heads_args(arg: str | None) -> tuple[str, dict]:
    """`PATH[,k=K,p=P,ngram=PATH|lm=PATH,w=W,rescore=global|local]` -> (path, options)."""
    path, *rest = (arg or "").split(",")
    options: dict = {}
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or key not in HEADS_OPTIONS or not value:
            raise SpecdecError(f"heads:PATH options are {HEADS_USAGE}; got {item!r}")
        try:
            options[key] = HEADS_OPTIONS[key](value)
        except ValueError:
            raise SpecdecError(f"heads option {key} needs a {HEADS_OPTIONS[key].__name__}, got {value!r}") from None
    if not (1 <= options.get("k", 1) <= 1024 and 1 <= options.get("p", 1) <= 1024
            and 0 <= options.get("w", 0.0) < math.inf):
        raise SpecdecError(f"heads options need k and p in 1 .. 1024 and a finite w >= 0, got {arg!r}")
    if options.get("rescore", "global") not in ("global", "local"):
        raise SpecdecError(f"heads option rescore is global or local, got {options['rescore']!r}")
    if "ngram" in options and "lm" in options:
        raise SpecdecError("heads options take one rescorer: ngram=PATH or lm=PATH, not both")
    if options.get("rescore") == "local" and ("ngram" not in options and "lm" not in options
                                              or options.get("p", 1) != 1):
        raise SpecdecError("heads rescore=local needs a rescorer (ngram=PATH or lm=PATH) and p=1")
    if "lm" in options and options.get("rescore") != "local":
        raise SpecdecError("heads lm=PATH rescores locally only: add rescore=local")
    if not path:
        raise SpecdecError("drafter 'heads' needs a path: heads:PATH")
    return path, options


def eagle_args(arg: str | None) -> tuple[str, tuple[int, int] | None, str]:
    """`PATH[,tree=N[,topk=K]][,weights=auto|fp32|bf16]` -> (path, None for chains or (topk,
    nodes) for trees, the precision of the draft's matrices when drafting: "auto" (bfloat16
    where the target runs the fast kernel), "fp32" or "bf16")."""
    path, *rest = (arg or "").split(",")
    options: dict[str, int] = {}
    weights = "auto"
    for item in rest:
        key, sep, value = item.partition("=")
        if key == "weights" and value in ("auto", "fp32", "bf16"):
            weights = value
            continue
        if key not in ("tree", "topk") or not sep or not value.isdigit() or not 1 <= int(value) <= 256:
            raise SpecdecError(f"eagle:PATH options are tree=N (nodes, 1..256), topk=K (1..256) and "
                               f"weights=auto|fp32|bf16; got {item!r}")
        options[key] = int(value)
    if not path:
        raise SpecdecError("drafter 'eagle' needs a path: eagle:PATH")
    if "topk" in options and "tree" not in options:
        raise SpecdecError("eagle option topk=K shapes a tree: add tree=N (the node budget)")
    return path, (options.get("topk", 4), options["tree"]) if "tree" in options else None, weights
