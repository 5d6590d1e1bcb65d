"""Read character vectors out of an R lazy-load database (`.rdb` + `.rdx`), without R: the
six Austen novels of Debian's `r-cran-janeaustenr`. Format and what is implemented:
docs/ngram.md.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from pathlib import Path
from typing import Any

from specdec.errors import SpecdecError

# SEXP types (R Internals, "Serialization formats")
_NILSXP, _SYMSXP, _LISTSXP, _CLOSXP, _ENVSXP, _PROMSXP, _LANGSXP = 0, 1, 2, 3, 4, 5, 6
_CHARSXP, _LGLSXP, _INTSXP, _REALSXP, _CPLXSXP, _STRSXP = 9, 10, 13, 14, 15, 16
_DOTSXP, _VECSXP, _EXPRSXP, _BCODESXP, _EXTPTRSXP, _WEAKREFSXP, _RAWSXP, _S4SXP = 17, 19, 20, 21, 22, 23, 24, 25
_REFSXP, _NILVALUE, _GLOBALENV, _UNBOUNDVALUE, _MISSINGARG, _BASENAMESPACE = 255, 254, 253, 252, 251, 250
_NAMESPACESXP, _PACKAGESXP, _PERSISTSXP, _EMPTYENV, _BASEENV, _ALTREP = 249, 248, 247, 242, 241, 238
_NA_INT = -(2**31)


class RList(list):
    """An R generic vector (or pairlist) with its attributes (e.g. `names`) and, for a
    pairlist, the tag of each element."""

    def __init__(self, items: list[Any], attributes: dict[str, Any] | None = None,
                 tags: list[str | None] | None = None) -> None:
        super().__init__(items)
        self.attributes = attributes or {}
        self.tags = tags if tags is not None else [None] * len(items)

    @property
    def names(self) -> list[str] | None:
        return self.attributes.get("names")


class _Reader:
    """Unserializes one XDR stream (R serialization format version 2 or 3)."""

    def __init__(self, data: bytes) -> None:
        if data[:2] != b"X\n":
            raise SpecdecError(f"not an XDR R serialization stream (header {data[:2]!r})")
        self.data, self.pos = data, 2
        version = self.int()
        self.int(), self.int()  # writer version, minimal reader version
        if version == 3:
            n = self.int()
            self.pos += n  # native encoding name
        elif version != 2:
            raise SpecdecError(f"unsupported R serialization version {version}")
        self.refs: list[Any] = []

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return v

    def length(self) -> int:
        n = self.int()
        if n == -1:
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        return n

    def item(self) -> Any:
        flags = self.int()
        kind = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        if kind == _NILVALUE or kind in (_EMPTYENV, _BASEENV, _GLOBALENV, _UNBOUNDVALUE,
                                         _MISSINGARG, _BASENAMESPACE):
            return None
        if kind == _REFSXP:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind in (_NAMESPACESXP, _PACKAGESXP, _PERSISTSXP):
            self.int()  # always 0
            value = [self.item() for _ in range(self.length())]
            self.refs.append(value)
            return value
        if kind == _SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if kind == _ENVSXP:
            env: dict[str, Any] = {}
            self.refs.append(env)
            self.int()  # locked
            self.item(), self.item(), self.item()  # enclosure, frame, hash table
            self.item()  # attributes
            return env
        if kind in (_LISTSXP, _LANGSXP, _CLOSXP, _PROMSXP, _DOTSXP):
            return self.pairlist(flags)
        if kind == _CHARSXP:
            n = self.int()
            if n == -1:
                return None
            raw = self.data[self.pos:self.pos + n]
            self.pos += n
            # the LATIN1 level bit (levels are flags >> 12, LATIN1_MASK = 1 << 2); else UTF-8/ASCII
            return raw.decode("latin-1" if flags & (1 << 14) else "utf-8", errors="replace")
        if kind == _ALTREP:
            return self.altrep()
        value = self.vector(kind)
        if has_attr:
            attributes = self.attributes()
            if isinstance(value, RList):
                value.attributes = attributes
            elif isinstance(value, list):
                value = RList(value, attributes)
        return value

    def vector(self, kind: int) -> Any:
        if kind in (_LGLSXP, _INTSXP):
            n = self.length()
            values = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
            return [None if v == _NA_INT else v for v in values]
        if kind == _REALSXP:
            n = self.length()
            values = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
            return values
        if kind == _CPLXSXP:
            n = self.length()
            values = struct.unpack_from(f">{2 * n}d", self.data, self.pos)
            self.pos += 16 * n
            return [complex(values[2 * i], values[2 * i + 1]) for i in range(n)]
        if kind == _RAWSXP:
            n = self.length()
            raw = self.data[self.pos:self.pos + n]
            self.pos += n
            return raw
        if kind == _STRSXP:
            return [self.item() for _ in range(self.length())]
        if kind in (_VECSXP, _EXPRSXP):
            return RList([self.item() for _ in range(self.length())])
        if kind == _S4SXP:
            return None
        raise SpecdecError(f"unsupported R object type {kind} at byte {self.pos}")

    def pairlist(self, flags: int) -> RList:
        items: list[Any] = []
        tags: list[str | None] = []
        attributes: dict[str, Any] = {}
        while True:
            if flags & (1 << 9):
                attributes.update(self.attributes())
            tags.append(self.item() if flags & (1 << 10) else None)
            items.append(self.item())
            flags = self.int()  # the CDR
            kind = flags & 0xFF
            if kind not in (_LISTSXP, _LANGSXP, _CLOSXP, _PROMSXP, _DOTSXP):
                self.pos -= 4
                tail = self.item()
                if tail is not None:
                    items.append(tail)
                    tags.append(None)
                break
        return RList(items, attributes, tags)

    def attributes(self) -> dict[str, Any]:
        attrs = self.item()
        if not isinstance(attrs, RList):
            return {}
        return {str(t): v for t, v in zip(attrs.tags, attrs) if t is not None}

    def altrep(self) -> Any:
        info, state = self.item(), self.item()
        self.item()  # attributes
        cls = info[0] if isinstance(info, list) and info else None
        if isinstance(cls, str) and cls.startswith("wrap_"):
            return state[0]
        if cls in ("compact_intseq", "compact_realseq"):
            n, start, step = state[0], state[1], state[2]
            seq = [start + i * step for i in range(int(n))]
            return [int(v) for v in seq] if cls == "compact_intseq" else seq
        if cls == "deferred_string":
            arg = state[0] if isinstance(state, list) else state
            return [None if v is None else str(v) for v in arg]
        raise SpecdecError(f"unsupported R ALTREP class {cls!r}")


def unserialize(data: bytes) -> Any:
    """Decode one R XDR serialization stream to Python lists, strings, numbers and RLists."""
    return _Reader(data).item()


def _blob(raw: bytes) -> bytes:
    """Decompress one `.rdb` entry: 4-byte length, then an optional type byte and data."""
    kind = raw[4:5]
    if kind == b"Z":
        return zlib.decompress(raw[5:])
    if kind == b"2":
        return bz2.decompress(raw[5:])
    if kind == b"X":
        return lzma.decompress(raw[5:])
    if kind == b"0":
        return raw[5:]
    return zlib.decompress(raw[4:])


def lazyload_index(rdx: Path) -> dict[str, tuple[int, int]]:
    """Map object name -> (offset, length) in the matching `.rdb` file."""
    data = Path(rdx).read_bytes()
    data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else _blob(data)
    index = unserialize(data)
    if not isinstance(index, RList) or index.names is None or "variables" not in index.names:
        raise SpecdecError(f"{rdx} is not an R lazy-load index (no `variables` entry)")
    variables = index[index.names.index("variables")]
    return {name: (int(pos[0]), int(pos[1])) for name, pos in zip(variables.names or [], variables)}


def read_lazyload(rdb: Path, names: list[str] | None = None) -> dict[str, Any]:
    """Objects `names` (all when None) of the lazy-load database `rdb` (with its `.rdx`)."""
    rdb = Path(rdb)
    index = lazyload_index(rdb.with_suffix(".rdx"))
    data = rdb.read_bytes()
    wanted = index if names is None else {n: index[n] for n in names}
    return {name: unserialize(_blob(data[off:off + n])) for name, (off, n) in wanted.items()}
