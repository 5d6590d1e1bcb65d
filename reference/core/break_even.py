"""The break-even stopping rule (issue 52) as a draft-length policy: the rule
`specdec.simulator.dynamic.optimal_stopping` prices as the ceiling of the confidence threshold.

With i tokens drafted and rho = the product of a(b) over their confidence bins (the chance they
are all accepted), the draft's token at position i + 1, whose confidence falls in bin b, is
drafted when rho a(b) >= lambda (v(i + 2) - v(i + 1)): its chance of being accepted with all before
it pays its share of the verify pass at the rate lambda the rule achieves (the speedup, found by
Dinkelbach's iteration). After drafting it, the next position is looked at only when its
expected gain, sum_b w(b) max(0, rho' a(b) - lambda dv), pays a draft forward, lambda c; else
the draft ends. Only where to stop depends on the rule: the acceptance rule is untouched, so
the output is exact (greedy equality, the target's law when sampling) whatever the law says.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from specdec.errors import SpecdecError

from specdec.reference.core.policy import PolicyBase

if TYPE_CHECKING:
    import torch


@dataclass
class BreakEven(PolicyBase):
    """Draft while rho a(b) >= rate dv (see the module doc). edges: the confidence bins' edges
    (0 .. 1), weights / accept: w(b) and a(b) per bin, c and verify_cost v(1..) in target steps
    (the loop's overhead folded in, as the predictions), rate: lambda (0: computed from the law
    by `optimal_stopping`). `estimate`: an estimate JSON (or validation.json) to read the law and
    the costs from instead (`specdec.stopping.read_stopping_inputs`), the command line's spelling
    `optimal:estimate=FILE`."""

    estimate: str = ""
    n_max: int = 8
    edges: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    accept: tuple[float, ...] = ()
    c: float = 0.0
    verify_cost: tuple[float, ...] = (1.0,)
    rate: float = 0.0
    rho: dict[int, float] = field(default_factory=dict, init=False, repr=False, compare=False)
    stopped: set[int] = field(default_factory=set, init=False, repr=False, compare=False)
    stops_early: ClassVar[bool] = True
    from_gamma: ClassVar[str] = "n_max"

    def __post_init__(self) -> None:
        from specdec.simulator.dynamic import ConfidenceLaw, optimal_stopping

        if self.n_max < 1:
            raise SpecdecError(f"optimal: n_max must be >= 1, got {self.n_max}")
        if self.estimate:
            from specdec.stopping import read_stopping_inputs

            inputs = read_stopping_inputs(self.estimate)
            self.edges = tuple(float(e) for e in inputs.law.edges)
            self.weights = tuple(float(w) for w in inputs.law.weights[0])
            self.accept = tuple(float(a) for a in inputs.law.accept[0])
            self.c, self.verify_cost = inputs.c, tuple(inputs.verify_cost)
        if not self.edges:
            raise SpecdecError("optimal: give the law (estimate=FILE: an estimate JSON with a confidence law and costs)")
        law = ConfidenceLaw(np.asarray(self.edges), np.asarray([self.weights]), np.asarray([self.accept]))
        v = np.asarray(self.verify_cost, dtype=np.float64)
        self._v = np.concatenate([v, np.full(max(0, self.n_max + 2 - v.size), v[-1])])
        if self.rate <= 0:
            self.rate = optimal_stopping(law, self.c, v, n_max=self.n_max).rate
        self._edges = np.asarray(self.edges, dtype=np.float64)
        self._w, self._a = np.asarray(self.weights), np.asarray(self.accept)

    @property
    def k_max(self) -> int:
        return self.n_max

    def budget(self, slot: int = 0) -> int:
        return self.n_max

    def _dv(self, i: int) -> float:
        """v(i + 2) - v(i + 1): the verify cost of a draft at 0-based position i."""
        return float(self._v[i + 1] - self._v[i])

    def _looks(self, i: int, rho: float) -> bool:
        """Is position i (0-based) worth a draft forward?"""
        gain = np.maximum(0.0, rho * self._a - self.rate * self._dv(i))
        return float((self._w * gain).sum()) >= self.rate * self.c

    def keep_going(self, position: int, q: "torch.Tensor", slot: int = 0) -> bool:
        if position == 0:
            self.stopped.discard(slot)
            self.rho[slot] = 1.0
            if not self._looks(0, 1.0):
                return False
        if slot in self.stopped or position >= self.n_max:
            return False
        b = min(int(np.searchsorted(self._edges, float(q.max()), side="right")) - 1, self._a.size - 1)
        rho = self.rho[slot]
        if rho * self._a[b] < self.rate * self._dv(position):
            return False
        rho *= self._a[b]
        self.rho[slot] = rho
        if position + 1 < self.n_max and not self._looks(position + 1, rho):
            self.stopped.add(slot)  # this token is the draft's last
        return True
