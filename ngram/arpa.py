"""Read ARPA n-gram files written by lmplz over token ids into numpy arrays (docs/ngram.md).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specdec.errors import SpecdecError
from specdec.paths import writing

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
SPECIALS = (BOS, EOS, UNK)

_COUNT = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_HEADER = re.compile(r"^\\(\d+)-grams:\s*$")


@dataclass
class NgramSection:
    """All n-grams of one order k, in file order.

    words: int32 [n, k], indices into `Arpa.vocab` (w1 ... wk; wk is the predicted word).
    logp: float32 [n], log10 p(wk | w1 ... w(k-1)).
    backoff: float32 [n], log10 backoff weight of w1 ... wk as a context (0 when absent).
    """

    words: np.ndarray
    logp: np.ndarray
    backoff: np.ndarray

    def __len__(self) -> int:
        return int(self.logp.shape[0])


@dataclass
class Arpa:
    """A parsed ARPA file. vocab: the 1-gram words in file order; sections[k-1]: order k."""

    vocab: list[str]
    sections: list[NgramSection]

    @property
    def order(self) -> int:
        return len(self.sections)

    def counts(self) -> list[int]:
        """Number of n-grams per order, [n1, n2, ...]."""
        return [len(s) for s in self.sections]


def read_counts(path: str | os.PathLike) -> list[int]:
    """The `ngram k=n` counts of an ARPA file's header, without reading the rest."""
    counts: list[int] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("\\") and line != "\\data\\":
                break
            m = _COUNT.match(line)
            if m:
                counts.append(int(m.group(2)))
    return counts


def read_arpa(path: str | os.PathLike) -> Arpa:
    """Parse an ARPA file into vectorised sections.

    Raises:
        FileNotFoundError: no such file.
        SpecdecError: not an ARPA file, truncated, counts that disagree with the sections,
            malformed lines, or n-grams using words missing from the 1-grams.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ARPA file {path} not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecdecError(f"{path} is not an ARPA file: not UTF-8 text ({exc.reason})") from None
    # split into [preamble, "\data\" block, "\1-grams:" block, ..., "\end\" block]
    blocks = re.split(r"^(\\[^\n]*)$", text, flags=re.MULTILINE)
    head = blocks[0].strip()
    if not text.strip():
        raise SpecdecError(f"{path} is not an ARPA file: it is empty")
    if len(blocks) < 3 or blocks[1].strip() != "\\data\\" or head:
        first = head.splitlines()[0] if head else blocks[1].strip() if len(blocks) > 1 else ""
        raise SpecdecError(f"{path} is not an ARPA file: expected '\\data\\' first, got {first[:40]!r}")
    declared: dict[int, int] = {}
    for line in blocks[2].splitlines():
        line = line.strip()
        if line:
            m = _COUNT.match(line)
            if not m:
                raise SpecdecError(f"{path}: corrupt ARPA header line {line[:40]!r}")
            declared[int(m.group(1))] = int(m.group(2))
    order = len(declared)
    if order == 0 or sorted(declared) != list(range(1, order + 1)):
        raise SpecdecError(f"{path}: corrupt ARPA header, n-gram counts for orders {sorted(declared)}")
    vocab: list[str] = []
    index: dict[str, int] = {}
    sections: list[NgramSection] = []
    pos = 3
    for k in range(1, order + 1):
        header = blocks[pos].strip() if pos < len(blocks) else None
        m = _HEADER.match(header) if header else None
        if m is None or int(m.group(1)) != k:
            raise SpecdecError(f"{path}: expected '\\{k}-grams:', got {str(header)[:40]!r}")
        section = _parse_section(path, k, blocks[pos + 1].strip("\n"), vocab, index)
        if len(section) != declared[k]:
            raise SpecdecError(f"{path}: header declares {declared[k]} {k}-grams, found {len(section)}")
        sections.append(section)
        pos += 2
    if pos >= len(blocks) or blocks[pos].strip() != "\\end\\":
        raise SpecdecError(f"{path}: truncated ARPA file (no '\\end\\' after the {order}-grams)")
    return Arpa(vocab, sections)


def _parse_section(path: Path, k: int, body: str, vocab: list[str], index: dict[str, int]) -> NgramSection:
    """Parse the text of the k-grams section. Extends vocab/index for k == 1."""
    if k > 1:
        fast = _parse_numeric_section(k, body, index)
        if fast is not None:
            return fast
    lines = [line for line in body.split("\n") if line.strip()]
    parts = [line.split("\t") for line in lines]
    bad = next((i for i, p in enumerate(parts) if len(p) not in (2, 3)), None)
    if bad is not None:
        raise SpecdecError(f"{path}: malformed {k}-gram line: {lines[bad][:60]!r}")
    try:
        logp = np.array([p[0] for p in parts], dtype=np.float64)
        backoff = np.array([p[2] if len(p) == 3 else 0.0 for p in parts], dtype=np.float64)
    except ValueError as exc:
        raise SpecdecError(f"{path}: non-numeric score in the {k}-grams: {exc}") from None
    if k == 1:
        for p in parts:
            word = p[1].strip()
            if word in index:
                raise SpecdecError(f"{path}: duplicate 1-gram {word!r}")
            index[word] = len(vocab)
            vocab.append(word)
        words = np.arange(len(parts), dtype=np.int32).reshape(-1, 1)
    else:
        flat = " ".join(p[1] for p in parts).split()
        if len(flat) != k * len(parts):
            raise SpecdecError(f"{path}: a {k}-gram line does not hold {k} words")
        try:
            words = np.fromiter((index[w] for w in flat), dtype=np.int32, count=len(flat)).reshape(-1, k)
        except KeyError as exc:
            raise SpecdecError(f"{path}: {k}-gram word {exc.args[0]!r} is not among the 1-grams") from None
    if not (np.isfinite(logp).all() and np.isfinite(backoff).all()):
        raise SpecdecError(f"{path}: non-finite score in the {k}-grams")
    return NgramSection(words, logp.astype(np.float32), backoff.astype(np.float32))


# Sentinels for KenLM's specials in the numeric fast path (token ids are >= 0).
_SENTINEL = {BOS: -1, EOS: -2, UNK: -3}


def _parse_numeric_section(k: int, body: str, index: dict[str, int]) -> NgramSection | None:
    """Vectorised parse of a k-gram section (k >= 2) whose lines all have the same number of
    fields and whose words are 1-gram words that are decimal ids or specials (what lmplz
    writes). Words are matched by numeric value against the 1-grams, which the exact
    per-line parser read. None: use that per-line parser (it gives the error messages)."""
    n = body.count("\n") + 1 if body.strip() else 0
    if n == 0:
        return None
    tabs = body.count("\t")
    if tabs not in (n, 2 * n):
        return None
    fields = k + (2 if tabs == 2 * n else 1)
    for word, value in _SENTINEL.items():
        body = body.replace(word, str(value))
    try:
        values = np.fromstring(body, dtype=np.float64, sep=" ")
    except ValueError:
        return None
    if values.size != n * fields:
        return None
    values = values.reshape(n, fields)
    raw = values[:, 1:k + 1]
    if not ((raw == np.round(raw)).all() and (raw >= -3).all() and np.isfinite(values).all()):
        return None
    raw = raw.astype(np.int64)
    ids = {(_SENTINEL[w] if w in _SENTINEL else int(w)): i for w, i in index.items()
           if w in _SENTINEL or (w.isdigit() and w.isascii() and str(int(w)) == w)}
    lookup = np.full(max(max(ids, default=0), int(raw.max())) + 4, -1, dtype=np.int64)
    lookup[np.fromiter(ids.keys(), dtype=np.int64) + 3] = np.fromiter(ids.values(), dtype=np.int64)
    words = lookup[raw + 3]
    if (words < 0).any():
        return None
    logp = values[:, 0].astype(np.float32)
    backoff = (values[:, k + 1] if fields == k + 2 else np.zeros(n)).astype(np.float32)
    return NgramSection(words.astype(np.int32), logp, backoff)


def unigram_as_bigram(src: str | os.PathLike, dst: str | os.PathLike) -> list[int]:
    """Rewrite an order-1 ARPA file (lmplz -o 1) as an order-2 file with no 2-grams.

    KenLM cannot load or binarize order-1 models ("assumes at least a bigram model"); an
    order-2 file whose 2-gram section is empty and whose back-offs are all 0 scores every
    word with its unigram probability in every context, so it is the same model.

    Returns: the n-gram counts written, [n1, 0].

    Raises:
        SpecdecError: `src` is not an order-1 ARPA file.
    """
    arpa = read_arpa(src)
    if arpa.order != 1:
        raise SpecdecError(f"{src} is an order-{arpa.order} ARPA file, expected order 1")
    section = arpa.sections[0]
    with writing(dst) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(f"\\data\\\nngram 1={len(section)}\nngram 2=0\n\n\\1-grams:\n")
        f.writelines(f"{lp:.9g}\t{arpa.vocab[i]}\t0\n" for (i,), lp in zip(section.words, section.logp.tolist()))
        f.write("\n\\2-grams:\n\n\\end\\\n")
    return [len(section), 0]
