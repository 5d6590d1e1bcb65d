"""An n-gram model as the draft distribution q over the target's whole vocabulary: the one
place where KenLM's log10 scores become natural logs and probabilities (docs/ngram.md).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from specdec.errors import SpecdecError
from specdec.ngram.tables import BackoffTables, load_tables

LN10 = math.log(10.0)
# Files of a model folder written by `ngram.build`.
ARPA_NAME, BINARY_NAME, META_NAME = "model.arpa", "model.binary", "model.json"

State = tuple[int, ...]


def resolve_arpa(path: str | os.PathLike) -> Path:
    """The ARPA file of a model: a model folder, an `.arpa` file, or a KenLM binary whose
    ARPA file sits beside it (`model.binary` -> `model.arpa`).

    Raises:
        FileNotFoundError: naming what was looked for.
    """
    path = Path(path)
    if path.is_dir():
        arpa = path / ARPA_NAME
    elif path.suffix == ".arpa":
        arpa = path
    else:
        arpa = path.with_suffix(".arpa")
    if not arpa.is_file():
        raise FileNotFoundError(f"n-gram model not found: no ARPA file at {arpa} "
                                f"(build one with `specdec ngram build --order N --out DIR`)")
    return arpa


def read_meta(arpa: Path) -> dict:
    """The build metadata (`model.json`) beside an ARPA file, or {} when there is none."""
    meta = arpa.with_name(META_NAME)
    if meta.is_file():
        return json.loads(meta.read_text())
    return {}


class NgramModel:
    """Fast next-token scoring of a back-off n-gram model over the target vocabulary.

    Args:
        tables: the model's back-off tables (`ngram.tables.load_tables`).
        vocab_size: V, the length of q (the target's output rows); every ARPA token id must be < V.
        eos_id: the target's EOS id that receives `</s>`'s mass in q (None: dropped).
        n_tokens: ids >= n_tokens are padding rows of the output layer, not tokens: q = 0
            there (default: V, no padding).
    """

    def __init__(self, tables: BackoffTables, vocab_size: int, eos_id: int | None = None,
                 n_tokens: int | None = None) -> None:
        tokens = tables.tokens
        real = tokens >= 0
        if real.any() and int(tokens[real].max()) >= vocab_size:
            raise SpecdecError(f"the n-gram model holds token id {int(tokens[real].max())}, "
                               f"outside a vocabulary of {vocab_size}")
        if eos_id is not None and not 0 <= eos_id < vocab_size:
            raise SpecdecError(f"eos_id {eos_id} outside a vocabulary of {vocab_size}")
        self.tables = tables
        self.order = tables.order
        self.vocab_size = vocab_size
        self.eos_id = eos_id
        self._compact = np.full(vocab_size, tables.unk, dtype=np.int64)  # token id -> compact word
        self._compact[tokens[real]] = np.nonzero(real)[0]
        n_tokens = vocab_size if n_tokens is None else n_tokens
        if not int(tokens.max(initial=-1)) < n_tokens <= vocab_size:
            raise SpecdecError(f"n_tokens {n_tokens} must lie in (largest model id, vocab_size {vocab_size}]")
        unseen = self._compact == tables.unk
        unseen[n_tokens:] = False
        self.n_unseen = int(unseen.sum())  # token ids that are <unk> to KenLM
        # log share of the <unk> mass each unseen id gets in q: -ln(n_unseen); padding: -inf
        self._share_ln = np.zeros(vocab_size, dtype=np.float32)
        if self.n_unseen:
            self._share_ln[unseen] = -math.log(self.n_unseen)
        self._share_ln[n_tokens:] = -np.inf
        # which compact words carry probability mass in q: real token ids, <unk> when some
        # ids are unseen, </s> when it maps to eos_id; never <s>
        self._mass = real.astype(np.float32)
        self._mass[tables.unk] = 1.0 if self.n_unseen else 0.0
        self._mass[tables.eos] = 1.0 if eos_id is not None else 0.0
        self._orders = [(k, tables.orders[k]) for k in range(2, self.order + 1)]

    @classmethod
    def load(cls, path: str | os.PathLike, vocab_size: int, eos_id: int | None = None) -> "NgramModel":
        """Load a model folder / ARPA file. eos_id defaults to the one recorded at build time;
        a vocab_size larger than the tokenizer's recorded one marks padding rows (q = 0)."""
        arpa = resolve_arpa(path)
        meta = read_meta(arpa)
        built = meta.get("vocab_size")
        if built is not None and built > vocab_size:
            raise SpecdecError(f"{arpa} was built for a vocabulary of {built} tokens, more than {vocab_size}")
        if eos_id is None:
            eos_id = meta.get("eos_id")
        return cls(load_tables(arpa), vocab_size, eos_id, n_tokens=built)

    # ---- context state -------------------------------------------------------------
    def begin(self, bos: bool = True) -> State:
        """Empty context; with bos, the sentence-start context `<s>` (KenLM BeginSentenceWrite)."""
        if bos and self.tables.bos >= 0 and self.order > 1:
            return (self.tables.bos,)
        return ()

    def advance(self, state: State, token: int) -> State:
        """The context after `token` (a target id): keeps the last N-1 words."""
        if self.order == 1:
            return ()
        return (state + (int(self._compact[token]),))[1 - self.order:]

    def state_for(self, tokens: Sequence[int], bos: bool = True) -> State:
        """Context after a whole token sequence (only its last N-1 tokens matter)."""
        state = self.begin(bos)
        if self.order > 1:
            for t in list(tokens)[max(0, len(tokens) - self.order + 1):]:
                state = self.advance(state, int(t))
        return state

    # ---- scores ----------------------------------------------------------------------
    def log10_words(self, state: State) -> np.ndarray:
        """log10 score of every compact word after `state`: float32 [W] (KenLM BaseScore)."""
        tables = self.tables
        scores = tables.unigram.copy()
        n = len(state)
        for k, table in self._orders:
            if n < k - 1:
                break
            key = tables.pack(state[n - k + 1:])
            row = int(np.searchsorted(table.keys, key))
            if row == table.keys.shape[0] or table.keys[row] != key:
                continue  # context never seen: L_k = L_(k-1)
            scores += table.backoff[row]
            a, b = table.indptr[row], table.indptr[row + 1]
            scores[table.succ[a:b]] = table.logp[a:b]
        return scores

    def log10_scores(self, state: State) -> np.ndarray:
        """Raw log10 score of every target id after `state`: float32 [V].

        Entry i is what KenLM's BaseScore gives the word str(i) (unseen ids score as <unk>).
        Not a distribution over the V ids: see `log_q`.
        """
        return self.log10_words(state)[self._compact]

    def log10_eos(self, state: State) -> float:
        """log10 score of `</s>` after `state`."""
        return float(self.log10_words(state)[self.tables.eos])

    def log_q(self, state: State, out: np.ndarray | None = None) -> np.ndarray:
        """Natural-log draft distribution over the target vocabulary: float32 [V], logsumexp 0.

        The one log10 -> probability boundary: <unk>'s mass is split equally among unseen
        ids, </s>'s mass goes to eos_id (or is dropped), <s> gets none, and the result is
        normalised. The normaliser is summed over the W compact words (each real word once,
        <unk> and </s> once each when they carry mass) before expanding to V ids.

        out: optional float32 [V] buffer to write into.
        """
        log_w = self.log10_words(state)
        log_w *= np.float32(LN10)                                       # [W] natural log
        top = log_w.max()
        z = float(np.dot(np.exp(log_w - top), self._mass))             # sum of word masses
        log_w -= np.float32(top + math.log(z))
        log_q = np.take(log_w, self._compact, out=out)                  # [V]
        log_q += self._share_ln
        if self.eos_id is not None:
            log_q[self.eos_id] = np.logaddexp(log_q[self.eos_id], log_w[self.tables.eos])
        return log_q

    def q(self, state: State) -> np.ndarray:
        """Draft distribution over the target vocabulary: float32 [V], sums to 1."""
        return np.exp(self.log_q(state))

    def score_sequence(self, tokens: Sequence[int], bos: bool = True) -> np.ndarray:
        """Teacher-forced q at every position: float32 [len(tokens), V] probabilities.

        Row i is q(. | tokens[:i+1]), the distribution of the token after tokens[i]
        (the same alignment as a causal LM's logits[i]).
        """
        out = np.empty((len(tokens), self.vocab_size), dtype=np.float32)
        state = self.begin(bos)
        for i, t in enumerate(tokens):
            state = self.advance(state, int(t))
            self.log_q(state, out=out[i])
        np.exp(out, out=out)
        return out
