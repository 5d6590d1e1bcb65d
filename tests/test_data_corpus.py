"""Corpus preparation: the R lazy-load reader, normalisation, chunking and the split.

The R reader is checked on a lazy-load database written here byte by byte in R's XDR
serialization format (a version-3 stream, as R 4 writes). Tests marked slow read the real
Shakespeare/Austen corpora and the default target's tokenizer.
"""
from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import pytest

from specdec.reference.data.corpus import (Document, chunk_document, eval_prompts, is_heldout, split_paragraphs,
                          strip_gutenberg, training_runs)
from specdec.reference.data.rdata import lazyload_index, read_lazyload, unserialize

HEADER = b"X\n" + struct.pack(">iii", 3, 0x040201, 0x030500) + struct.pack(">i", 5) + b"UTF-8"
NIL = struct.pack(">i", 254)


def charsxp(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">ii", 9, -1)
    raw = s.encode("utf-8")
    return struct.pack(">ii", 9 | (1 << 15), len(raw)) + raw  # UTF8 level bit


def strsxp(values: list[str | None]) -> bytes:
    return struct.pack(">ii", 16, len(values)) + b"".join(charsxp(v) for v in values)


def names_attr(names: list[str]) -> bytes:
    """A pairlist `names = <names>` (tagged LISTSXP ending in NILVALUE)."""
    return struct.pack(">i", 2 | (1 << 10)) + struct.pack(">i", 1) + charsxp("names") + strsxp(names) + NIL


def vecsxp(items: list[bytes], names: list[str] | None = None) -> bytes:
    flags = 19 | ((1 << 9) if names else 0)
    body = struct.pack(">ii", flags, len(items)) + b"".join(items)
    return body + (names_attr(names) if names else b"")


def intsxp(values: list[int]) -> bytes:
    return struct.pack(">ii", 13, len(values)) + struct.pack(f">{len(values)}i", *values)


def write_lazyload(folder: Path, objects: dict[str, bytes]) -> Path:
    """Write name -> serialized body into folder/db.rdb + db.rdx the way R lays them out."""
    blobs, index, offset = b"", [], 0
    for name, body in objects.items():
        stream = HEADER + body
        blob = struct.pack(">I", len(stream)) + zlib.compress(stream)
        index.append((name, offset, len(blob)))
        blobs += blob
        offset += len(blob)
    variables = vecsxp([intsxp([o, n]) for _, o, n in index], [name for name, _, _ in index])
    rdx = HEADER + vecsxp([variables, vecsxp([]), struct.pack(">ii", 10, 1) + struct.pack(">i", 1)],
                          ["variables", "references", "compressed"])
    (folder / "db.rdb").write_bytes(blobs)
    (folder / "db.rdx").write_bytes(gzip.compress(rdx))
    return folder / "db.rdb"


def test_r_lazyload_reader_round_trip(tmp_path) -> None:
    novel = ["EMMA", "", "Emma Woodhouse, handsome, clever,", "and rich.", "", "Caf\u00e9 au lait", None]
    rdb = write_lazyload(tmp_path, {"emma": strsxp(novel), "nums": intsxp([1, 2, 3])})
    index = lazyload_index(tmp_path / "db.rdx")
    assert list(index) == ["emma", "nums"]
    assert index["emma"][0] == 0 and index["nums"][0] == index["emma"][1]  # (offset, length)
    objects = read_lazyload(rdb)
    assert objects["emma"] == novel
    assert objects["nums"] == [1, 2, 3]
    assert read_lazyload(rdb, ["nums"]) == {"nums": [1, 2, 3]}


def test_r_reader_rejects_other_formats() -> None:
    with pytest.raises(ValueError, match="not an XDR"):
        unserialize(b"A\n123")


def test_strip_gutenberg_keeps_only_the_work() -> None:
    text = ("The Project Gutenberg EBook of Hamlet\nlicence blah\n"
            "*** START OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\nACT I.\n\nWho's there?\n"
            "*** END OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\nMore licence text\n")
    assert strip_gutenberg(text).strip() == "ACT I.\n\nWho's there?"
    assert strip_gutenberg("no markers here") == "no markers here"


def test_split_paragraphs_unwraps_prose_and_keeps_verse() -> None:
    text = "It is a truth  universally\r\nacknowledged, that\n\n\n  Ber.\nWho's there?  \n \nEnd"
    assert split_paragraphs(text, unwrap=True) == [
        "It is a truth universally acknowledged, that", "Ber. Who's there?", "End"]
    assert split_paragraphs(text, unwrap=False) == [
        "It is a truth universally\nacknowledged, that", "Ber.\nWho's there?", "End"]


def test_chunks_split_and_runs_are_deterministic() -> None:
    doc = Document("austen", "emma", tuple(f"Paragraph {i} " + "word " * 60 for i in range(400)))
    chunks = chunk_document(doc, chunk_chars=1000)
    assert chunks == chunk_document(doc, chunk_chars=1000)
    assert all(len(c.text) >= 1000 for c in chunks[:-1])
    assert "\n\n".join(c.text for c in chunks) == "\n\n".join(doc.paragraphs)  # nothing lost
    held = [c.index for c in chunks if c.heldout]
    assert held == [i for i in range(len(chunks)) if is_heldout("austen", "emma", i)]
    assert 0 < len(held) < len(chunks) / 5
    runs = training_runs(chunks)
    flags = [c.heldout for c in chunks]
    starts = sum(1 for i, h in enumerate(flags) if not h and (i == 0 or flags[i - 1]))
    assert len(runs) == starts  # one run per maximal stretch of training chunks
    training_text = "\n\n".join(runs)
    assert all(c.text not in training_text for c in chunks if c.heldout)
    assert all(c.text in training_text for c in chunks if not c.heldout)


@pytest.mark.slow
def test_real_corpus_and_eval_prompts() -> None:
    from specdec.reference.data.corpus import load_chunks, prepare_corpus

    chunks = load_chunks()
    docs = {(c.source, c.doc) for c in chunks}
    assert len(docs) == 48  # 42 Shakespeare texts + 6 Austen novels
    corpus = prepare_corpus()
    assert corpus.meta["train_tokens"] > 2_000_000 and corpus.meta["vocab_size"] == 49152
    first = eval_prompts(8, min_tokens=64, continuation_tokens=32)
    again = eval_prompts(8, min_tokens=64, continuation_tokens=32)
    assert first == again
    assert all(len(p.ids) == 64 and len(p.continuation) == 32 for p in first)
    assert {p.source for p in first} == {"shakespeare", "austen"}
    held = {(c.source, c.doc, c.index) for c in chunks if c.heldout}
    assert all((p.source, p.doc, p.chunk) in held for p in first)
    with pytest.raises(ValueError, match="held-out chunks"):
        eval_prompts(10_000, min_tokens=64)


def test_python_source_windows_skip_what_is_not_library_code(tmp_path) -> None:
    """Windows of the library's source: whole windows only, none from tests, codec tables or
    build configuration; a smaller n is a prefix of a larger (crc32 order); too many refused."""
    from specdec.errors import SpecdecError
    from specdec.reference.data.python_source import library_files, python_windows
    from tests.fakes import word_tokenizer

    word_tokenizer().save_pretrained(tmp_path / "tok")
    lib = tmp_path / "lib"
    for rel, words in [("a.py", range(0, 10)), ("pkg/b.py", range(10, 17)), ("test/t.py", range(20, 40)),
                       ("encodings/cp.py", range(40, 50)), ("config-3.11-x86_64-linux-gnu/c.py", range(50, 60)),
                       ("pkg/notes.txt", range(60, 70))]:
        (lib / rel).parent.mkdir(parents=True, exist_ok=True)
        (lib / rel).write_text(" ".join(f"w{i}" for i in words))
    assert [p.relative_to(lib).as_posix() for p in library_files(lib)] == ["a.py", "pkg/b.py"]
    windows, meta = python_windows(5, 3, tokenizer_dir=tmp_path / "tok", root=lib)
    assert meta["python_files"] == 2 and meta["python_windows_available"] == 5  # 3 of a.py, 2 of b.py
    expected = {(0, 1, 2), (3, 4, 5), (6, 7, 8), (10, 11, 12), (13, 14, 15)}
    assert {tuple(w) for w in windows} == expected  # non-overlapping, whole windows, library files only
    assert python_windows(2, 3, tokenizer_dir=tmp_path / "tok", root=lib)[0] == windows[:2]
    with pytest.raises(SpecdecError, match="has 5 windows of 3 tokens; asked for 6"):
        python_windows(6, 3, tokenizer_dir=tmp_path / "tok", root=lib)
    from specdec.reference.heads.build import DataConfig

    assert DataConfig(tokens=4096, aligned_tokens=1000, code_tokens=3096).code_tokens == 3096
    with pytest.raises(SpecdecError, match="code_tokens <= tokens - aligned_tokens"):
        DataConfig(tokens=4096, aligned_tokens=1000, code_tokens=3097)  # the corpus share is what code takes from
