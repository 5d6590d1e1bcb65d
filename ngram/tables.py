"""Vectorised back-off tables of an ARPA model, cached as `.npz` beside it and stamped with the
ARPA file's size and mtime (docs/ngram.md).
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specdec.errors import SpecdecError
from specdec.ngram.arpa import BOS, EOS, SPECIALS, UNK, Arpa, read_arpa
from specdec.paths import writing

# Bump when the cached layout changes: stale caches are rebuilt, never misread.
TABLES_VERSION = 1
# KenLM's log10 probability for <unk> when an ARPA file lacks it (build_binary -u default).
MISSING_UNK_LOG10 = -100.0


@dataclass
class OrderTable:
    """Contexts of length k-1 and their explicit successors (see the module docstring)."""

    keys: np.ndarray      # uint64 [C]
    backoff: np.ndarray   # float32 [C]
    indptr: np.ndarray    # int64 [C + 1]
    succ: np.ndarray      # int32 [E]
    logp: np.ndarray      # float32 [E]


@dataclass
class BackoffTables:
    """Everything needed to score the next word after any context.

    order: N, the longest n-gram.
    tokens: int64 [W], the target token id of each compact word; -1 for <s>, </s>, <unk>.
    unigram: float32 [W], log10 p(w) (with <s> at -99: it is only ever context).
    unigram_backoff: float32 [W], log10 back-off of w as a one-word context.
    bos, eos, unk: compact indices of <s>, </s>, <unk> (bos = -1 if absent).
    bits: bits per word in a packed context key.
    orders: {k: OrderTable} for k = 2..N.
    """

    order: int
    tokens: np.ndarray
    unigram: np.ndarray
    unigram_backoff: np.ndarray
    bos: int
    eos: int
    unk: int
    bits: int
    orders: dict[int, OrderTable] = field(default_factory=dict)

    @property
    def n_words(self) -> int:
        return int(self.tokens.shape[0])

    def pack(self, context: tuple[int, ...]) -> np.uint64:
        """Packed key of a context tuple of compact word indices (oldest first)."""
        key = 0
        for w in context:
            key = (key << self.bits) | w
        return np.uint64(key)


def build_tables(arpa: Arpa) -> BackoffTables:
    """Turn a parsed ARPA file into back-off tables.

    Raises:
        SpecdecError: a word that is neither a decimal token id nor a KenLM special, an
            order too long to pack into 64-bit keys, or an n-gram whose context is missing.
    """
    vocab = list(arpa.vocab)
    unigram = arpa.sections[0].logp.copy()
    unigram_backoff = arpa.sections[0].backoff.copy()
    if UNK not in vocab:
        vocab.append(UNK)
        unigram = np.append(unigram, np.float32(MISSING_UNK_LOG10))
        unigram_backoff = np.append(unigram_backoff, np.float32(0.0))
    tokens = np.empty(len(vocab), dtype=np.int64)
    for i, word in enumerate(vocab):
        if word in SPECIALS:
            tokens[i] = -1
        elif word.isdigit() and word.isascii():
            tokens[i] = int(word)
        else:
            raise SpecdecError(f"ARPA word {word!r} is neither a decimal token id nor one of {SPECIALS}")
    if EOS not in vocab:
        raise SpecdecError(f"ARPA file has no {EOS} 1-gram")
    n_words = len(vocab)
    bits = max(1, (n_words - 1).bit_length())
    if bits * (arpa.order - 1) > 64:
        raise SpecdecError(f"order {arpa.order} with {n_words} words does not fit 64-bit context keys "
                           f"({bits} bits a word); use order <= {64 // bits + 1}")
    tables = BackoffTables(
        order=arpa.order, tokens=tokens, unigram=unigram.astype(np.float32),
        unigram_backoff=unigram_backoff.astype(np.float32),
        bos=vocab.index(BOS) if BOS in vocab else -1, eos=vocab.index(EOS), unk=vocab.index(UNK), bits=bits)
    for k in range(2, arpa.order + 1):
        ctx = arpa.sections[k - 2]
        if k == 2:
            ctx_words, ctx_backoff = np.arange(n_words, dtype=np.int32)[:, None], tables.unigram_backoff
        else:
            ctx_words, ctx_backoff = ctx.words, ctx.backoff
        tables.orders[k] = _order_table(k, ctx_words, ctx_backoff, arpa.sections[k - 1], bits)
    return tables


def _pack_rows(words: np.ndarray, bits: int) -> np.ndarray:
    """words int [n, m] -> uint64 [n] keys, first column in the highest bits."""
    key = np.zeros(words.shape[0], dtype=np.uint64)
    for j in range(words.shape[1]):
        key = (key << np.uint64(bits)) | words[:, j].astype(np.uint64)
    return key


def _order_table(k: int, ctx_words: np.ndarray, ctx_backoff: np.ndarray, section, bits: int) -> OrderTable:
    ctx_keys = _pack_rows(ctx_words, bits)
    order = np.argsort(ctx_keys, kind="stable")
    ctx_keys, ctx_backoff = ctx_keys[order], ctx_backoff[order]
    if ctx_keys.size > 1 and (np.diff(ctx_keys) == 0).any():
        raise SpecdecError(f"duplicate {k - 1}-grams in the ARPA file")
    prefix = _pack_rows(section.words[:, :-1], bits)
    rows = np.searchsorted(ctx_keys, prefix)
    found = (rows < ctx_keys.size) & (ctx_keys[np.minimum(rows, ctx_keys.size - 1)] == prefix)
    if not found.all():
        raise SpecdecError(f"{int((~found).sum())} {k}-grams have no {k - 1}-gram context in the ARPA file")
    counts = np.bincount(rows, minlength=ctx_keys.size)
    keep = (counts > 0) | (ctx_backoff != 0)
    by_row = np.argsort(rows, kind="stable")
    succ = section.words[by_row, -1].astype(np.int32)
    logp = section.logp[by_row].astype(np.float32)
    # drop contexts that change nothing (no successors, zero back-off); rows stay in order
    indptr = np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64)
    return OrderTable(ctx_keys[keep], ctx_backoff[keep].astype(np.float32), indptr, succ, logp)


def tables_path(arpa_path: str | os.PathLike) -> Path:
    """Where the cached tables of an ARPA file live: `<name>.tables.npz` beside it."""
    arpa_path = Path(arpa_path)
    return arpa_path.with_name(arpa_path.name + ".tables.npz")


def save_tables(tables: BackoffTables, path: str | os.PathLike, source: Path | None = None) -> Path:
    """Write the tables (uncompressed npz, atomic), stamped with the ARPA file's size/mtime."""
    path = Path(path)
    stamp = _stamp(source) if source is not None else np.array([0, 0], dtype=np.int64)
    arrays: dict[str, np.ndarray] = {
        "meta": np.array([TABLES_VERSION, tables.order, tables.bos, tables.eos, tables.unk, tables.bits], dtype=np.int64),
        "stamp": stamp, "tokens": tables.tokens, "unigram": tables.unigram,
        "unigram_backoff": tables.unigram_backoff,
    }
    for k, t in tables.orders.items():
        arrays.update({f"keys{k}": t.keys, f"backoff{k}": t.backoff, f"indptr{k}": t.indptr,
                       f"succ{k}": t.succ, f"logp{k}": t.logp})
    with writing(path) as tmp, open(tmp, "wb") as f:  # a file object: savez adds no ".npz" to its name
        np.savez(f, **arrays)
    return path


def load_tables(arpa_path: str | os.PathLike, cache: bool = True) -> BackoffTables:
    """Tables of an ARPA file, from the `.npz` cache when it is current, else parsed (and cached).

    Raises:
        FileNotFoundError: no ARPA file.
        SpecdecError: a corrupt ARPA file (see `read_arpa`, `build_tables`).
    """
    arpa_path = Path(arpa_path)
    if not arpa_path.is_file():
        raise FileNotFoundError(f"ARPA file {arpa_path} not found")
    npz = tables_path(arpa_path)
    if cache and npz.is_file():
        tables = _read_npz(npz, _stamp(arpa_path))
        if tables is not None:
            return tables
    tables = build_tables(read_arpa(arpa_path))
    if cache:
        save_tables(tables, npz, source=arpa_path)
    return tables


def _stamp(path: Path) -> np.ndarray:
    st = Path(path).stat()
    return np.array([st.st_size, st.st_mtime_ns], dtype=np.int64)


def _read_npz(npz: Path, stamp: np.ndarray) -> BackoffTables | None:
    """The cached tables, or None when the cache is stale, from another version, or unreadable."""
    try:
        with np.load(npz) as z:
            meta = z["meta"]
            if int(meta[0]) != TABLES_VERSION or not np.array_equal(z["stamp"], stamp):
                return None
            order = int(meta[1])
            tables = BackoffTables(order=order, tokens=z["tokens"], unigram=z["unigram"],
                                   unigram_backoff=z["unigram_backoff"], bos=int(meta[2]),
                                   eos=int(meta[3]), unk=int(meta[4]), bits=int(meta[5]))
            for k in range(2, order + 1):
                tables.orders[k] = OrderTable(z[f"keys{k}"], z[f"backoff{k}"], z[f"indptr{k}"],
                                              z[f"succ{k}"], z[f"logp{k}"])
            return tables
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
