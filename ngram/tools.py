"""Run KenLM's estimation tools: `lmplz` (ARPA from text) and `build_binary`.

The KenLM Python wheel only queries models; `scripts/setup.sh` builds the two command-line
tools from the kenlm sdist into the cache's `kenlm/bin` (`specdec.paths.kenlm_bin_dir`). They
are located, in order, from an explicit argument, the environment variable SPECDEC_KENLM_BIN,
or that default folder.

lmplz is always run with a memory bound (`-S`) and a temporary folder of our own (`-T`):
left alone it reserves most of the machine's RAM even for a three-line corpus.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from specdec.errors import SpecdecError
from specdec.paths import kenlm_bin_dir as default_bin_dir
from specdec.paths import writing

KENLM_BIN_ENV = "SPECDEC_KENLM_BIN"

# lmplz fails with this message when a corpus is too small to estimate Kneser-Ney discounts.
_DISCOUNT_ERROR = re.compile(r"discount|BadDiscountException", re.IGNORECASE)


def kenlm_bin_dir(bin_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding lmplz and build_binary: argument, $SPECDEC_KENLM_BIN, or the default."""
    if bin_dir is not None:
        return Path(bin_dir)
    env = os.environ.get(KENLM_BIN_ENV)
    return Path(env) if env else default_bin_dir()


def find_tool(name: str, bin_dir: str | os.PathLike | None = None) -> Path:
    """Path of the KenLM executable `name` ("lmplz" or "build_binary").

    Raises:
        FileNotFoundError: naming the missing binary and how to build it.
    """
    folder = kenlm_bin_dir(bin_dir)
    path = folder / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(
            f"KenLM's `{name}` not found at {path} (set {KENLM_BIN_ENV} to its folder, "
            f"or run `bash scripts/setup.sh`, which builds lmplz and build_binary)"
        )
    return path


@dataclass
class LmplzResult:
    """What one lmplz run did.

    arpa: the ARPA file written.
    discount_fallback: whether `--discount_fallback` was needed (tiny corpus).
    seconds: wall time of the lmplz run(s).
    log: lmplz's stderr (statistics, discounts, memory estimates).
    """

    arpa: Path
    discount_fallback: bool
    seconds: float
    log: str


def run_lmplz(
    text: Path,
    arpa: Path,
    order: int,
    memory: str = "10%",
    discount_fallback: bool | None = None,
    bin_dir: str | os.PathLike | None = None,
) -> LmplzResult:
    """Estimate a modified Kneser-Ney model of `order` from `text` (one sequence a line).

    Args:
        text: training file, words separated by spaces.
        arpa: output ARPA path (written atomically).
        order: n-gram order >= 1 (order 1 works in lmplz, but KenLM cannot load the result:
            see `ngram.arpa.unigram_as_bigram`).
        memory: lmplz `-S` bound ("10%", "1G", ...).
        discount_fallback: True/False forces `--discount_fallback`; None tries without it and
            retries with it only if lmplz reports that it cannot estimate the discounts.
        bin_dir: folder of the KenLM binaries (see `kenlm_bin_dir`).

    Raises:
        SpecdecError: order < 1, an empty corpus, or lmplz failing (its message is included).
    """
    if order < 1:
        raise SpecdecError(f"n-gram order must be >= 1, got {order}")
    text = Path(text)
    if not text.is_file():
        raise FileNotFoundError(f"training text {text} not found")
    if not _has_words(text):
        raise SpecdecError(f"training text {text} is empty: nothing to estimate an n-gram model from")
    lmplz = find_tool("lmplz", bin_dir)
    arpa = Path(arpa)
    arpa.parent.mkdir(parents=True, exist_ok=True)
    attempts = [discount_fallback] if discount_fallback is not None else [False, True]
    start = time.perf_counter()
    log = ""
    for fallback in attempts:
        with tempfile.TemporaryDirectory(prefix="lmplz-", dir=arpa.parent) as tmp:
            cmd = [str(lmplz), "-o", str(order), "-S", memory, "-T", tmp, "--text", str(text)]
            cmd += ["--discount_fallback", "--arpa"] if fallback else ["--arpa"]
            try:
                log = _run_writing(cmd, arpa)
                return LmplzResult(arpa, bool(fallback), time.perf_counter() - start, log)
            except _ToolFailed as failed:
                log = failed.log
        if not (fallback is False and discount_fallback is None and _DISCOUNT_ERROR.search(log)):
            break
    raise SpecdecError(f"lmplz failed on {text} (order {order}): {_last_lines(log)}")


def run_build_binary(arpa: Path, binary: Path, bin_dir: str | os.PathLike | None = None) -> float:
    """Convert an ARPA file to KenLM's binary (probing) format. Returns the seconds taken.

    Raises:
        SpecdecError: build_binary rejected the ARPA file (its message is included).
    """
    tool = find_tool("build_binary", bin_dir)
    start = time.perf_counter()
    try:
        _run_writing([str(tool), "-S", "10%", str(arpa)], Path(binary))
    except _ToolFailed as failed:
        raise SpecdecError(f"build_binary failed on {arpa}: {_last_lines(failed.log)}") from None
    return time.perf_counter() - start


class _ToolFailed(Exception):
    """A KenLM tool exited with an error; `log` is its stderr."""

    def __init__(self, log: str) -> None:
        super().__init__(log)
        self.log = log


def _run_writing(cmd: list[str], out: Path) -> str:
    """Run a tool that writes the file named by its last argument, appended here: `out`
    appears (renamed from a temporary name) only if the tool succeeds. Returns its stderr.

    Raises:
        _ToolFailed: a non-zero exit status (nothing is written).
    """
    with writing(out) as partial:
        proc = subprocess.run([*cmd, str(partial)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise _ToolFailed(proc.stderr)
    return proc.stderr


def _has_words(text: Path) -> bool:
    with open(text, "rb") as f:
        for line in f:
            if line.strip():
                return True
    return False


def _last_lines(log: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in log.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) if lines else "(no output)"
