"""Build an n-gram model folder from a training text of token ids: lmplz, build_binary, the
tables and model.json, built beside the folder and renamed into place (docs/ngram.md).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.ngram.arpa import read_counts, unigram_as_bigram
from specdec.ngram.model import ARPA_NAME, BINARY_NAME, META_NAME
from specdec.ngram.tables import load_tables, tables_path
from specdec.ngram.tools import run_build_binary, run_lmplz
from specdec.paths import building


@dataclass
class BuildReport:
    """What `build_model` produced. Sizes in bytes, times in seconds.

    counts: n-grams per order as written in the ARPA header ([n1, ..., nN]).
    """

    order: int
    out: str
    counts: list[int]
    arpa_bytes: int
    binary_bytes: int
    tables_bytes: int
    lmplz_seconds: float
    build_binary_seconds: float
    tables_seconds: float
    discount_fallback: bool
    vocab_size: int
    eos_id: int | None
    training_tokens: int
    training_lines: int
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def build_model(text: str | os.PathLike, order: int, out: str | os.PathLike, vocab_size: int,
                eos_id: int | None = None, memory: str = "10%", discount_fallback: bool | None = None,
                bin_dir: str | os.PathLike | None = None, extra: dict | None = None,
                force: bool = False) -> BuildReport:
    """Estimate, binarize and tabulate an order-`order` model of `text` into folder `out`.

    The model is built in a scratch folder beside `out` and renamed into place at the end, so
    at every moment `out` holds either the complete old model or the complete new one (or,
    for an instant during the swap, nothing); an interrupted build leaves the old model.

    Args:
        text: training file, one sequence of decimal token ids a line.
        order: n-gram order, 1 to 5 (the packed context keys hold 4 words of 16 bits).
        out: output folder (created; a folder that already holds files is replaced only with force).
        vocab_size: the target's vocabulary size V (every id in `text` must be < V).
        eos_id: the target id that `</s>` stands for (recorded; None: </s> is dropped from q).
        memory: lmplz's `-S` bound.
        discount_fallback: force `--discount_fallback` on/off; None decides automatically.
        bin_dir: folder of lmplz/build_binary (default: see `ngram.tools.kenlm_bin_dir`).
        extra: more metadata to record in model.json (corpus name, tokenizer ...).
        force: replace an existing `out`.

    Raises:
        FileExistsError: `out` already holds files and force is False.
        FileNotFoundError: no training text, or KenLM binaries missing.
        SpecdecError: bad order, empty text, token ids >= vocab_size, lmplz/build_binary errors.
    """
    if not 1 <= order <= 5:
        raise SpecdecError(f"order must be between 1 and 5, got {order}")
    if vocab_size < 1:
        raise SpecdecError(f"vocab_size must be >= 1, got {vocab_size}")
    if eos_id is not None and not 0 <= eos_id < vocab_size:
        raise SpecdecError(f"eos_id must be a token id in 0..{vocab_size - 1}, got {eos_id}")
    text, out = Path(text), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise FileExistsError(f"{out} already exists and is not empty: pass force (--force) to replace it")
    lines, tokens, top = check_text(text, vocab_size)
    with building(out) as work:  # KeyboardInterrupt too: the old model stays, the scratch folder goes
        report = _build_in(work, text, order, out, vocab_size, eos_id, memory, discount_fallback, bin_dir, extra,
                           (lines, tokens))
    return report


def _build_in(work: Path, text: Path, order: int, out: Path, vocab_size: int, eos_id: int | None, memory: str,
              discount_fallback: bool | None, bin_dir, extra: dict | None, scanned: tuple[int, int]) -> BuildReport:
    """Every model file into `work`; model.json records the final folder `out`."""
    lines, tokens = scanned
    arpa, binary = work / ARPA_NAME, work / BINARY_NAME
    if order == 1:
        raw = work / "unigram.order1.arpa"
        result = run_lmplz(text, raw, 1, memory=memory, discount_fallback=discount_fallback, bin_dir=bin_dir)
        unigram_as_bigram(raw, arpa)
        raw.unlink()
    else:
        result = run_lmplz(text, arpa, order, memory=memory, discount_fallback=discount_fallback, bin_dir=bin_dir)
    binary_seconds = run_build_binary(arpa, binary, bin_dir=bin_dir)
    start = time.perf_counter()
    load_tables(arpa)  # parses the ARPA file and writes the .npz cache
    tables_seconds = time.perf_counter() - start
    counts = read_counts(arpa)
    report = BuildReport(
        order=order, out=str(out), counts=counts[:1] if order == 1 else counts,
        arpa_bytes=arpa.stat().st_size, binary_bytes=binary.stat().st_size,
        tables_bytes=tables_path(arpa).stat().st_size, lmplz_seconds=round(result.seconds, 3),
        build_binary_seconds=round(binary_seconds, 3), tables_seconds=round(tables_seconds, 3),
        discount_fallback=result.discount_fallback, vocab_size=vocab_size, eos_id=eos_id,
        training_tokens=tokens, training_lines=lines, extra=dict(extra or {}))
    (work / META_NAME).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


def _lines(f, text: Path):
    """The file's lines; bytes that are not UTF-8 are an error naming the file."""
    try:
        yield from f
    except UnicodeDecodeError as exc:
        raise SpecdecError(f"training text {text} is not UTF-8 text of token ids (byte {exc.start} of a "
                           "block is invalid)") from None


def check_text(text: Path | str, vocab_size: int) -> tuple[int, int, int]:
    """(non-empty lines, tokens, largest token id) of a training file of token-id lines, checked:
    it exists, is UTF-8 decimal ids, none negative or outside `vocab_size`, and not empty.

    Raises:
        FileNotFoundError: no such file. SpecdecError: any other problem of its contents.
    """
    text = Path(text)
    if not text.is_file():
        raise FileNotFoundError(f"training text {text} not found")
    lines, tokens, top = _scan(text)
    if tokens == 0:
        raise SpecdecError(f"training text {text} is empty: nothing to estimate an n-gram model from")
    if top >= vocab_size:
        raise SpecdecError(f"training text {text} holds token id {top}, outside a vocabulary of {vocab_size}")
    return lines, tokens, top


def _scan(text: Path) -> tuple[int, int, int]:
    """(non-empty lines, tokens, largest token id) of a training file.

    Raises:
        SpecdecError: a word that is not a decimal token id, or bytes that are not UTF-8.
    """
    lines = tokens = 0
    top = -1
    with open(text, encoding="utf-8", errors="strict") as f:
        for lineno, line in enumerate(_lines(f, text), 1):
            words = line.split()
            if not words:
                continue
            try:
                ids = [int(w) for w in words]
            except ValueError:
                raise SpecdecError(f"{text}:{lineno}: training words must be decimal token ids, "
                                   f"got {line.split()[0][:20]!r}...") from None
            lines += 1
            tokens += len(ids)
            top = max(top, max(ids))
            if min(ids) < 0:
                raise SpecdecError(f"{text}:{lineno}: negative token id")
    return lines, tokens, top
