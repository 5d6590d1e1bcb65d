"""The drafter spec of the command line, parsed without importing torch (so --help is fast).

    none                    no drafter: plain autoregressive decoding
    lookup[:N[:earliest|latest]]  prompt lookup, longest suffix n-gram up to N tokens (default 3),
                            its latest earlier occurrence (`:earliest`: the first one, HF's rule)
    ngram:PATH              KenLM n-gram model over the target's token ids (ARPA or its folder)
    llamacpp:ngram-simple[:N] | llamacpp:ngram-mod[:N[:MIN]]
                            llama.cpp's n-gram drafters rule for rule (pattern N, default 12; window N,
                            default 24, drafts of at least MIN, default 1): what llama-server drafts
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
from typing import Callable

from specdec.errors import SpecdecError


@dataclass(frozen=True)
class DrafterSpec:
    kind: str  # a key of DRAFTER_KINDS
    arg: str | None = None

    @classmethod
    def parse(cls, spec: str) -> "DrafterSpec":
        kind, _, arg = spec.partition(":")
        if kind not in DRAFTER_KINDS:
            raise SpecdecError(f"unknown drafter {shown(spec)}: expected {spec_help()}")
        entry = DRAFTER_KINDS[kind]
        if entry.needs_path and not arg:
            raise SpecdecError(f"drafter {kind!r} needs a path: {kind}:PATH")
        if entry.check is not None:
            entry.check(arg)  # validates (one line, SpecdecError)
        return cls(kind, arg or None)

    @property
    def files(self) -> "SpecFiles":
        """What the argument names, as the kind reads it (`DrafterKind.files`)."""
        kind = DRAFTER_KINDS[self.kind]
        if kind.files is not None:
            return kind.files(self.arg)
        return SpecFiles((self.arg,)) if kind.needs_path and self.arg else SpecFiles()

    @property
    def tree(self) -> bool:
        """Whether the drafter proposes token trees (a heads lattice: heads with options; a feature
        draft with tree=N); the drafter object says so too (`Drafter.tree`)."""
        return self.files.tree

    @property
    def model_paths(self) -> list[str]:
        """The causal LMs the spec names (model:PATH, heads' lm=PATH): folders or .gguf files."""
        return list(self.files.models)

    @property
    def ngram_paths(self) -> list[str]:
        """The KenLM models the spec names (ngram:PATH, heads' ngram=PATH)."""
        return list(self.files.ngrams)

    @property
    def paths(self) -> list[str]:
        """The files or folders the spec names (checked to exist before any model loads)."""
        return list(self.files.paths)

    def preflight(self) -> None:
        """The kind's own check of its files, once they exist (one-line SpecdecError), before any
        model loads: a heads lattice against the heads' card, a feature draft's folder."""
        check = DRAFTER_KINDS[self.kind].preflight
        if check is not None:
            check(self.arg)


@dataclass(frozen=True)
class SpecFiles:
    """What a spec's argument names: every file or folder (checked to exist), the causal LMs and
    the KenLM models among them, and whether the drafter it builds proposes trees."""

    paths: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    ngrams: tuple[str, ...] = ()
    tree: bool = False


def model_files(arg: str | None) -> SpecFiles:
    return SpecFiles((arg,), models=(arg,))


def ngram_files(arg: str | None) -> SpecFiles:
    return SpecFiles((arg,), ngrams=(arg,))


def heads_files(arg: str | None) -> SpecFiles:
    """The heads' folder and its rescorer (ngram=PATH or lm=PATH); options make a lattice (a tree)."""
    path, options = heads_args(arg)
    return SpecFiles((path, *(options[key] for key in ("ngram", "lm") if key in options)),
                     models=tuple(v for k, v in options.items() if k == "lm"),
                     ngrams=tuple(v for k, v in options.items() if k == "ngram"), tree=bool(options))


def eagle_files(arg: str | None) -> SpecFiles:
    path, tree, _ = eagle_args(arg)
    return SpecFiles((path,), tree=tree is not None)


def heads_preflight(arg: str | None) -> None:
    """The lattice's size (the card's heads and vocabulary) bounds p before anything loads."""
    from specdec.reference.heads.files import read_card

    path, options = heads_args(arg)
    card = read_card(path)
    problem = heads_lattice_problem(options, card.get("n_heads"), card.get("vocab"))
    if problem:
        raise SpecdecError(f"heads:{shown(arg)}: {problem}")


def eagle_preflight(arg: str | None) -> None:
    from specdec.reference.eagle.files import eagle_folder

    eagle_folder(eagle_args(arg)[0])


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
    if whole(n, 1, MAX_LOOKUP_NGRAM) is None or match not in ("", "latest", "earliest"):
        raise SpecdecError(f"lookup[:N[:earliest|latest]] needs an integer N in 1 .. {MAX_LOOKUP_NGRAM}, "
                           f"got {shown(arg)}")
    return int(n), match or "latest"


LLAMACPP_NGRAMS = {"ngram-simple": (12,), "ngram-mod": (24, 1)}  # the numbers' defaults


def llamacpp_args(arg: str | None) -> tuple[str, ...]:
    """`ngram-simple[:N]` -> ("ngram-simple", N); `ngram-mod[:N[:MIN]]` -> ("ngram-mod", N, MIN)."""
    kind, *numbers = (arg or "").split(":")
    defaults = LLAMACPP_NGRAMS.get(kind)
    parsed = None if defaults is None or len(numbers) > len(defaults) else \
        [whole(x, 1 if i == 0 else 0, MAX_LOOKUP_NGRAM) for i, x in enumerate(numbers)]
    if parsed is None or None in parsed:
        raise SpecdecError("llamacpp:ngram-simple[:N] or llamacpp:ngram-mod[:N[:MIN]] needs integers N in "
                           f"1 .. {MAX_LOOKUP_NGRAM}, MIN in 0 .. {MAX_LOOKUP_NGRAM}, got {shown(arg)}")
    return (kind, *parsed, *defaults[len(parsed):])


def whole(text: str, low: int, high: int) -> int | None:
    """The integer `text` spells in plain ASCII digits (no sign, no `_`, no other script's digits,
    at most as many digits as `high` has), when it lies in low .. high; else None."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))):
        return None
    return int(text) if low <= int(text) <= high else None


def shown(text: str | None, most: int = 40) -> str:
    """`text` quoted for a one-line message, cut to `most` characters (a spec may be huge)."""
    text = text or ""
    return repr(text) if len(text) <= most else repr(text[:most]) + f"... ({len(text)} characters)"


HEADS_OPTIONS = ("k", "p", "w", "ngram", "lm", "rescore")
HEADS_USAGE = "k=K, p=P, ngram=PATH, lm=PATH, w=W, rescore=global|local"
HEADS_DEFAULT_K = 4  # candidates per head when p (or a rescorer) asks for a lattice without k (as the factory)
HEADS_MAX_K = 1024  # candidates per head: a top-k over the heads' output ids
HEADS_MAX_PATHS = 256  # paths verified together: up to p x H tree nodes in one target pass
MAX_HEADS = 16  # the most heads `specdec heads train --heads` makes


def heads_args(arg: str | None) -> tuple[str, dict]:
    """`PATH[,k=K,p=P,ngram=PATH|lm=PATH,w=W,rescore=global|local]` -> (path, options); every
    bound and contradiction that needs no file is refused here, before any path is looked at
    (the lattice's own size, k^H, once the heads' card is read: `heads_lattice_problem`)."""
    path, *rest = (arg or "").split(",")
    options: dict = {}
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or key not in HEADS_OPTIONS or not value:
            raise SpecdecError(f"heads:PATH options are {HEADS_USAGE}; got {shown(item)}")
        if key in options:
            raise SpecdecError(f"heads option {key} is given twice ({shown(arg)})")
        options[key] = heads_value(key, value)
    if options.get("rescore", "global") not in ("global", "local"):
        raise SpecdecError(f"heads option rescore is global or local, got {shown(options['rescore'])}")
    if "ngram" in options and "lm" in options:
        raise SpecdecError("heads options take one rescorer: ngram=PATH or lm=PATH, not both")
    if options.get("rescore") == "local" and ("ngram" not in options and "lm" not in options
                                              or options.get("p", 1) != 1):
        raise SpecdecError("heads rescore=local needs a rescorer (ngram=PATH or lm=PATH) and p=1")
    if "lm" in options and options.get("rescore") != "local":
        raise SpecdecError("heads lm=PATH rescores locally only: add rescore=local")
    if "w" in options and "ngram" not in options and "lm" not in options:
        raise SpecdecError("heads option w weights a rescorer: add ngram=PATH or lm=PATH, or drop w")
    k, p = options.get("k", HEADS_DEFAULT_K), options.get("p", 1)
    if p > k ** MAX_HEADS:  # k = 1: a lattice of single candidates has one path, whatever H
        raise SpecdecError(f"heads option p={p} asks for more paths than a top-{k} lattice has "
                           f"({k}^H, H <= {MAX_HEADS} heads): raise k or lower p")
    if not path:
        raise SpecdecError("drafter 'heads' needs a path: heads:PATH")
    return path, options


def heads_value(key: str, value: str) -> int | float | str:
    """One heads option's value, bounded: k in 1 .. HEADS_MAX_K, p in 1 .. HEADS_MAX_PATHS, w a
    finite number >= 0; paths and rescore as given."""
    if key in ("k", "p"):
        high = HEADS_MAX_K if key == "k" else HEADS_MAX_PATHS
        number = whole(value, 1, high)
        if number is None:
            what = "candidates per head" if key == "k" else "paths verified together, each up to H tree nodes"
            raise SpecdecError(f"heads option {key} needs a whole number in 1 .. {high} ({what}), got {shown(value)}")
        return number
    if key == "w":
        try:
            weight = float(value) if value.isascii() and len(value) <= 32 else math.nan
        except ValueError:
            weight = math.nan
        if not 0 <= weight < math.inf:
            raise SpecdecError(f"heads option w needs a finite w >= 0, got {shown(value)}")
        return weight
    return value


def heads_lattice_problem(options: dict, n_heads: object, vocab: object) -> str | None:
    """Why `options` (from `heads_args`) cannot be drafted by n_heads heads over `vocab` output
    ids (both as a heads card states them), or None: p above the k^H paths their lattice has (k
    capped at the ids they propose)."""
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (n_heads, vocab)) \
            or not (1 <= n_heads <= MAX_HEADS and vocab >= 1):
        return (f"the card states {shown(str(n_heads))} heads over {shown(str(vocab))} ids: not a heads card of this "
                "version")
    k = min(options.get("k", HEADS_DEFAULT_K), vocab)
    p = options.get("p", 1)
    if options and p > k ** n_heads:
        return (f"p={p} asks for more paths than the top-{k} lattice of {n_heads} heads has "
                f"({k}^{n_heads} = {k ** n_heads}): lower p or raise k")
    return None


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
        number = whole(value, 1, 256) if key in ("tree", "topk") and sep else None
        if number is None:
            raise SpecdecError(f"eagle:PATH options are tree=N (nodes, 1..256), topk=K (1..256) and "
                               f"weights=auto|fp32|bf16; got {shown(item)}")
        if key in options:
            raise SpecdecError(f"eagle option {key} is given twice ({shown(arg)})")
        options[key] = number
    if not path:
        raise SpecdecError("drafter 'eagle' needs a path: eagle:PATH")
    if "topk" in options and "tree" not in options:
        raise SpecdecError("eagle option topk=K shapes a tree: add tree=N (the node budget)")
    return path, (options.get("topk", 4), options["tree"]) if "tree" in options else None, weights


# ---- the registry: one line per drafter kind ------------------------------------------------

@dataclass(frozen=True)
class DrafterKind:
    """One kind of the grammar. module: where it is built, a module with
    `build_drafter(arg, target, device="cpu", dtype="float32", device_map=None) -> (Drafter, note)`
    (imported only when one is built, so parsing stays torch-free); usage: its spelling for the
    help; needs_path: `KIND:PATH`; check: validates the argument before anything loads (one-line
    SpecdecError; None: any); causal_only: it reads a causal target's own states (no
    encoder-decoder); files: what the argument names (`SpecFiles`; None: PATH itself when
    needs_path); preflight: checks those files' contents once they exist (None: nothing more)."""

    module: str
    usage: str
    needs_path: bool = False
    check: Callable[[str | None], object] | None = None
    causal_only: bool = False
    files: Callable[[str | None], SpecFiles] | None = None
    preflight: Callable[[str | None], None] | None = None


DRAFTER_KINDS: dict[str, DrafterKind] = {
    "none": DrafterKind("specdec.reference.drafters.protocol", "none"),
    "lookup": DrafterKind("specdec.reference.drafters.prompt_lookup", "lookup[:N[:earliest|latest]] (prompt lookup)",
                          check=lookup_args),
    "ngram": DrafterKind("specdec.reference.drafters.ngram", "ngram:PATH (KenLM)", needs_path=True, files=ngram_files),
    "model": DrafterKind("specdec.reference.drafters.neural", "model:PATH (HF causal LM folder or .gguf file)",
                         needs_path=True, files=model_files),
    "heads": DrafterKind("specdec.reference.drafters.heads", "heads:PATH (heads on the target)", needs_path=True,
                         check=heads_args, causal_only=True, files=heads_files, preflight=heads_preflight),
    "eagle": DrafterKind("specdec.reference.drafters.eagle",
                         "eagle:PATH[,tree=N,topk=K,weights=W] (feature draft on the target)", needs_path=True,
                         check=eagle_args, causal_only=True, files=eagle_files, preflight=eagle_preflight),
    "llamacpp": DrafterKind("specdec.reference.drafters.llamacpp_ngram",
                            "llamacpp:ngram-simple[:N] | llamacpp:ngram-mod[:N[:MIN]] (llama.cpp's n-gram drafters)",
                            check=llamacpp_args),
}


def spec_help() -> str:
    """Every kind's spelling, for help texts and refusals."""
    return " | ".join(kind.usage for kind in DRAFTER_KINDS.values())


SPEC_HELP = spec_help()  # the built-in kinds, for click's help strings (built at import)
