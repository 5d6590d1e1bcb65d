"""Draft-length policies: how many tokens a step may draft, and when drafting stops early.

gamma is the draft length, q the draft's distribution (Leviathan et al.). The decode loop owns
the policy (vLLM's draft-length policy; transformers' `update_candidate_strategy`): each step it
asks `budget(slot)` for the most drafts, hands `keep_going` to the drafter (which calls it
before drafting each position and stops at the first False), and reports the verdict to
`observe`. Drafters hold no stopping logic of
their own. A rule is one class here (or in a module of its own) and one line in `POLICIES`;
`parse_policy` reads the command-line spelling `name:key=value,...`. Adding a rule:
docs/architecture.md. Torch-free at import, so a command checks its option before loading.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from specdec.errors import SpecdecError

if TYPE_CHECKING:
    import torch

    from specdec.reference.core.seams import Verdict

# keep_going(position, q_row): what a drafter calls (the step binds the slot to the policy's
# keep_going); position 0-based in this draft; q_row: the drafter's own unadjusted distribution
# over the next token there ([V], or [V'] over a restricted vocabulary: probabilities
# before temperature, top-k and top-p, so a threshold means the same when greedy). False: stop
# before this position (its token is not drafted).
KeepGoing = Callable[[int, "torch.Tensor"], bool]


class DraftPolicy(Protocol):
    """What the decode loop asks a draft-length rule. slot: the batch row (0 for one sequence)."""

    k_max: int  # the most budget() ever returns (sizes the loop's per-position counts)
    stops_early: bool  # keep_going may return False (drafters then compute q's top probability)

    def start(self, slot: int = 0) -> None:
        """A new sequence begins in `slot`."""

    def budget(self, slot: int = 0) -> int:
        """Most draft tokens this step (the loop caps it by the tokens left)."""

    def keep_going(self, position: int, q: "torch.Tensor", slot: int = 0) -> bool:
        """Draft position `position` (0-based) of slot `slot` from q, the unadjusted draft
        distribution there?"""

    def observe(self, verdict: "Verdict", slot: int = 0) -> None:
        """The step's outcome in `slot` (verdict.bonus: every draft was accepted)."""


class PolicyBase:
    """Defaults: no early stop, no state. `from_gamma` names the field that
    the command's --gamma fills when the spelling leaves it out."""

    stops_early: ClassVar[bool] = False
    from_gamma: ClassVar[str] = "gamma"

    def start(self, slot: int = 0) -> None:
        pass

    def keep_going(self, position: int, q: "torch.Tensor", slot: int = 0) -> bool:
        return True

    def observe(self, verdict: "Verdict", slot: int = 0) -> None:
        pass


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise SpecdecError(what)


@dataclass(frozen=True)
class FixedGamma(PolicyBase):
    """Draft gamma tokens every step (Leviathan et al.'s fixed gamma); gamma 0: the baseline."""

    gamma: int

    def __post_init__(self) -> None:
        _check(self.gamma >= 0, f"gamma must be >= 0, got {self.gamma}")

    @property
    def k_max(self) -> int:
        return self.gamma

    def budget(self, slot: int = 0) -> int:
        return self.gamma


@dataclass
class ConfidenceThreshold(PolicyBase):
    """Stop before the first position past n_min whose draft top probability max q is below tau
    (BiLD's fallback, Kim et al. 2023 Sec. 3.3; llama.cpp's --spec-draft-p-min), at most n_max
    drafts; the first n_min positions are drafted whatever their confidence (the model of
    `specdec.simulator.dynamic.threshold_prediction`; llama.cpp's --spec-draft-n-min instead
    drops a draft shorter than n_min). keep_last: draft the token that fell below tau too, then
    stop, as transformers' assistant_confidence_threshold does (it reads the drawn token's
    probability: the top one when greedy). tau 0: never stops early."""

    tau: float = 0.4
    n_min: int = 0
    n_max: int = 10
    keep_last: bool = False
    stopped: set[int] = field(default_factory=set, init=False, repr=False, compare=False)  # slots whose draft ended
    from_gamma: ClassVar[str] = "n_max"

    def __post_init__(self) -> None:
        _check(0.0 <= self.tau <= 1.0, f"the confidence threshold tau must be in [0, 1], got {self.tau}")
        _check(0 <= self.n_min <= self.n_max, f"need 0 <= n_min <= n_max, got {self.n_min}, {self.n_max}")

    @property
    def stops_early(self) -> bool:
        return self.tau > 0

    @property
    def k_max(self) -> int:
        return self.n_max

    def budget(self, slot: int = 0) -> int:
        return self.n_max

    def keep_going(self, position: int, q: "torch.Tensor", slot: int = 0) -> bool:
        if position == 0:
            self.stopped.discard(slot)  # a new draft
        if slot in self.stopped:
            return False  # keep_last: the token below tau was the draft's last
        if position < self.n_min or float(q.max()) >= self.tau:
            return True
        if self.keep_last:
            self.stopped.add(slot)
        return self.keep_last


@dataclass
class HeuristicSchedule(PolicyBase):
    """transformers' `heuristic` schedule of num_assistant_tokens: `initial` drafts, +2 after a
    step whose every draft was accepted, -1 (at least 1) otherwise, at most n_max. Each sequence
    starts again from `initial` (HF's heuristic_transient); persist=True carries the count over
    to the slot's next sequence, as HF's `heuristic` does across generate calls."""

    initial: int = 20
    n_max: int = 64
    persist: bool = False
    current: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)  # slot -> budget
    from_gamma: ClassVar[str] = "initial"

    def __post_init__(self) -> None:
        _check(1 <= self.initial <= self.n_max, f"need 1 <= initial <= n_max, got {self.initial}, {self.n_max}")

    @property
    def k_max(self) -> int:
        return self.n_max

    def start(self, slot: int = 0) -> None:
        if not self.persist or slot not in self.current:
            self.current[slot] = self.initial

    def budget(self, slot: int = 0) -> int:
        return self.current.setdefault(slot, self.initial)

    def observe(self, verdict: "Verdict", slot: int = 0) -> None:
        n = self.budget(slot)
        self.current[slot] = min(n + 2, self.n_max) if verdict.bonus else max(1, n - 1)


from specdec.reference.core.break_even import BreakEven  # noqa: E402 (it builds on PolicyBase above)

POLICIES: dict[str, type] = {
    "fixed": FixedGamma,
    "confidence": ConfidenceThreshold,
    "heuristic": HeuristicSchedule,
    "optimal": BreakEven,
}


def as_policy(gamma: "int | DraftPolicy") -> "DraftPolicy":
    """A draft length given as a number is the fixed-gamma rule."""
    return gamma if hasattr(gamma, "budget") else FixedGamma(operator.index(gamma))


def parse_policy(text: str, gamma: int) -> "DraftPolicy":
    """'fixed', 'confidence:tau=0.4,n_min=1', 'heuristic:initial=4' -> a policy; the field the
    rule's `from_gamma` names defaults to `gamma`. Errors are one line (SpecdecError)."""
    name, _, rest = text.strip().partition(":")
    cls = POLICIES.get(name)
    if cls is None:
        raise SpecdecError(f"unknown draft-length rule {name!r}: one of {', '.join(POLICIES)}")
    kinds = {f.name: f.type for f in fields(cls) if f.init and f.type in ("int", "float", "bool", "str")}
    options: dict[str, Any] = {cls.from_gamma: gamma}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or key not in kinds:
            raise SpecdecError(f"{name}: expected key=value with a key among {', '.join(kinds)}, got {part!r}")
        options[key] = _value(name, key, value, kinds[key])
    return cls(**options)


def _value(rule: str, key: str, text: str, kind: Any) -> Any:
    kind = {"int": int, "float": float, "bool": bool, "str": str}.get(kind, kind)
    try:
        if kind is bool:
            return {"1": True, "true": True, "0": False, "false": False}[text.strip().lower()]
        return kind(text)
    except (KeyError, ValueError):
        expected = {int: "a whole number", float: "a number", bool: "0 or 1"}.get(kind, kind)
        raise SpecdecError(f"{rule}: {key}={text!r}, expected {expected}") from None
