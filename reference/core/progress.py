"""Progress for long phases, always on stderr: a tqdm bar on a terminal, otherwise a plain
line at the start, about every `every` seconds, and at the end (no carriage-return frames
in logs)."""
from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm


class PlainProgress:
    """The part of tqdm's interface the project uses, as periodic lines."""

    def __init__(self, total: int, desc: str, unit: str, every: float = 10.0) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n = 0
        self.start = self.last = time.monotonic()
        self._line(f"{desc}: 0/{total} {unit}")

    def _line(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self._line(f"{self.desc}: {self.n}/{self.total} {self.unit} ({now - self.start:.0f} s)")

    def close(self) -> None:
        self._line(f"{self.desc}: {self.n}/{self.total} {self.unit}, done in {time.monotonic() - self.start:.1f} s")


class NoProgress:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress(total: int, desc: str, unit: str, enabled: bool = True):
    """A progress reporter with update(n) and close(): nothing when not enabled."""
    if not enabled:
        return NoProgress()
    if sys.stderr.isatty():
        return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr)
    return PlainProgress(total, desc, unit)


def phase(text: str, enabled: bool = True) -> None:
    """One line on stderr announcing a phase that has no counter (e.g. timing the target)."""
    if enabled:
        print(text, file=sys.stderr, flush=True)
