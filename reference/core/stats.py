"""Decoding statistics, stored as counts; every rate is derived by a function.

Conventions: a draft position i (1-based) is *reached* in an iteration when the drafter
proposed at least i tokens and the first i - 1 were accepted; `alpha_per_position[i]` is
accepted_i / reached_i, the acceptance of draft token i given the earlier ones were
accepted. `mean_accepted` counts accepted drafts only (no bonus / recovered token);
`tokens_per_iteration` counts every emitted token, i.e. it includes the token drawn from
the target each iteration, like E[#tokens] of Eq. 1. An iteration is one target pass; in
BiLD's words an accepted draft is a *kept* little token and a rejection a *rollback*.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence


@dataclass
class DecodeStats:
    gamma: int
    iterations: int = 0
    new_tokens: int = 0
    drafted: int = 0
    bonus: int = 0  # iterations whose every draft (>= 1) was accepted
    # iterations in which the drafter proposed fewer than it was allowed (BiLD's fallback on
    # confidence, a drafter that ran out: EOS, no prompt-lookup match)
    short_proposals: int = 0
    reached: list[int] = field(default_factory=list)  # [gamma] reached count per position
    accepted: list[int] = field(default_factory=list)  # [gamma] accepted count per position
    accepted_hist: list[int] = field(default_factory=list)  # [gamma + 1] iterations by n accepted
    proposed_hist: list[int] = field(default_factory=list)  # [gamma + 1] iterations by n proposed
    target_passes: int = 0  # forward passes of the target, the prefill included
    verified: int = 0  # draft tokens fed to the target (= drafted, but every node of a draft tree)
    time_prefill: float = 0.0
    time_draft: float = 0.0  # drafter: propose and commit
    time_verify: float = 0.0  # target forward pass, acceptance rule, target cache crop
    time_pass: float = 0.0  # of time_verify: the target's forward passes alone
    time_total: float = 0.0
    cpu_prefill: float = 0.0  # this process's CPU seconds (all threads) in the prefill
    cpu_total: float = 0.0  # and in the whole decode

    def __post_init__(self) -> None:
        self.reached = self.reached or [0] * self.gamma
        self.accepted = self.accepted or [0] * self.gamma
        self.accepted_hist = self.accepted_hist or [0] * (self.gamma + 1)
        self.proposed_hist = self.proposed_hist or [0] * (self.gamma + 1)

    def record(self, n_proposed: int, n_accepted: int, bonus: bool, allowed: int | None = None,
               verified: int | None = None) -> None:
        """Count one iteration that proposed n_proposed drafts (of `allowed`) and accepted
        n_accepted; verified: draft tokens fed to the target (a tree's nodes; default n_proposed)."""
        self.iterations += 1
        self.drafted += n_proposed
        self.verified += n_proposed if verified is None else verified
        self.bonus += int(bonus)
        self.short_proposals += int(allowed is not None and n_proposed < allowed)
        self.accepted_hist[n_accepted] += 1
        self.proposed_hist[n_proposed] += 1
        for i in range(min(n_accepted + 1, n_proposed)):
            self.reached[i] += 1
        for i in range(n_accepted):
            self.accepted[i] += 1

    @classmethod
    def total(cls, parts: Sequence["DecodeStats"]) -> "DecodeStats":
        """The counts of several runs (of one gamma), summed."""
        out = cls(parts[0].gamma)
        for part in parts:
            out = out.merge(part)
        return out

    def merge(self, other: "DecodeStats") -> "DecodeStats":
        """Sum of two runs' counts (same gamma)."""
        if other.gamma != self.gamma:
            raise ValueError("cannot merge statistics of different gamma")
        out = DecodeStats(self.gamma)
        for name, value in asdict(self).items():
            if name == "gamma":
                continue
            theirs = getattr(other, name)
            setattr(out, name, [a + b for a, b in zip(value, theirs)] if isinstance(value, list) else value + theirs)
        return out

    # ---- derived counts and rates ----------------------------------------------------
    def kept(self) -> int:
        """Accepted drafts in all (BiLD: little tokens kept)."""
        return sum(self.accepted)

    def rejections(self) -> int:
        """Iterations in which a draft was rejected (BiLD: rolled back)."""
        return sum(self.reached) - sum(self.accepted)

    def alpha(self) -> float:
        """Acceptance rate: accepted drafts / reached draft positions (nan if none)."""
        reached = sum(self.reached)
        return sum(self.accepted) / reached if reached else float("nan")

    def alpha_per_position(self) -> list[float]:
        return [a / r if r else float("nan") for a, r in zip(self.accepted, self.reached)]

    def mean_accepted(self) -> float:
        """Mean accepted drafts per iteration (bonus/recovered token NOT counted)."""
        return sum(self.accepted) / self.iterations if self.iterations else float("nan")

    def tokens_per_iteration(self) -> float:
        """Mean emitted tokens per target pass (includes the target's own token)."""
        return self.new_tokens / self.iterations if self.iterations else float("nan")

    def keep_rate(self) -> float:
        """Drafts accepted / drafts proposed (BiLD's analogue of alpha)."""
        return self.kept() / self.drafted if self.drafted else float("nan")

    def rejection_rate(self) -> float:
        """Fraction of iterations with a rejection (BiLD: rollback rate)."""
        return self.rejections() / self.iterations if self.iterations else float("nan")

    def tokens_per_second(self) -> float:
        return self.new_tokens / self.time_total if self.time_total else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(alpha=self.alpha(), alpha_per_position=self.alpha_per_position(),
                 mean_accepted=self.mean_accepted(), tokens_per_iteration=self.tokens_per_iteration(),
                 keep_rate=self.keep_rate(), rejection_rate=self.rejection_rate(),
                 tokens_per_second=self.tokens_per_second())
        return d
