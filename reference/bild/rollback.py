"""BiLD's rollback threshold alpha_RB as the command line gives it (torch-free, so an option is
checked before anything heavy imports)."""
from __future__ import annotations

import math

from specdec.errors import SpecdecError

ARGMAX = "argmax"  # roll back to the first draft token that is not the target's argmax


def parse_rollback(text: str) -> float | str:
    """'2.5' -> 2.5; 'inf', 'none' or 'off' -> math.inf; 'argmax' -> 'argmax'."""
    t = text.strip().lower()
    if t == ARGMAX:
        return ARGMAX
    if t in ("inf", "none", "off"):
        return math.inf
    try:
        value = float(t)
    except ValueError:
        raise SpecdecError(f"rollback threshold {text!r}: expected a number of nats, inf or {ARGMAX!r}") from None
    if not value >= 0:  # negative, or nan
        raise SpecdecError(f"rollback threshold {text!r}: must be >= 0 nats, inf or {ARGMAX!r}")
    return value
