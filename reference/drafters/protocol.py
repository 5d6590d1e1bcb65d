"""The drafter protocol: anything that proposes draft tokens for the target to verify.

Names follow Leviathan et al.: p is the target's distribution, q the draft's, gamma the
number of drafted tokens per iteration.

A drafter follows the committed sequence (prompt + every token the decoder has emitted).
`propose` drafts up to gamma tokens after it, asking the loop's draft-length policy
(`keep_going`) before each position; it may keep speculative state (e.g. KV entries of
drafted tokens), which `commit` discards beyond what was accepted. What a
drafter can do it states itself (`needs`, `deterministic`, `tree`, `fallback`, `max_draft`, `c_hat`,
`teacher_forced_scorer`): the loop, the estimator, the cost timing and BiLD ask it, never
its type. Drafters are built from plain values (a path, an order), never from a global
config; one that holds resources is closed by whoever built it (`with drafter:`).
Adding a drafter: docs/architecture.md.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Protocol, Sequence

import torch

from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import NOTHING, Needs, Proposal, Scored, Verdict
from specdec.reference.drafters.slots import DraftSlots, Forked

if TYPE_CHECKING:  # the estimator's side of the seam (imported lazily by drafters that have one)
    from specdec.reference.estimate.teacher_forced import DraftScorer


class Drafter(Protocol):
    """What the decode loop, the estimator and the cost timing need from a draft model."""

    needs: Needs  # what the drafter reads from the target's passes (received in start/commit)
    deterministic: bool  # its proposals never carry q (one-hot at its tokens at every temperature)
    tree: bool  # it may propose several drafts as one token tree (at T > 0 only deterministic trees are verified)
    fallback: bool  # it asks keep_going before each position, so a policy can stop it early (BiLD's fallback)
    max_draft: int | None  # most tokens it can ever propose at once (heads: H), None: no limit

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        """Begin a new sequence: the committed sequence becomes `prompt`. prefill: the target's
        pass over the prompt but its last token (hidden states as `needs` asks), None when the
        prompt's encoding is fused into the first verification."""

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Draft up to gamma tokens continuing the committed sequence.

        keep_going(position, q_row): the loop's draft-length policy, asked before drafting each
            position with the drafter's own unadjusted distribution there (before temperature,
            top-k, top-p); at the first False the draft ends and that token is not proposed.
            None (default): draft all gamma. A deterministic drafter (prompt lookup) has no
            distribution to show and is never stopped.
        """

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        """The decoder appended verdict.tokens to the committed sequence.

        verdict.tokens[:n_accepted] are the accepted drafts of the last proposal (a tree's
        path: verdict.path); the last token is new (recovered or bonus). Speculative state
        past the accepted drafts must be discarded. scored: the pass that verified them
        (hidden states as `needs` asks; verdict.last_row is the row of the last token).
        """

    def c_hat(self, target_flops: float) -> float:
        """Arithmetic operations per drafted token / the target's per token (Theorem 10)."""

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int,
                              generator: torch.Generator | None) -> "DraftScorer":
        """The estimator's scorer of this drafter on the target's own sequences."""

    def fork(self) -> "Drafter":
        """A drafter over the same model(s) with its own per-sequence state."""

    def slots(self, rows: int, capacity: int) -> "DraftSlots":
        """This drafter for the `rows` slots of a ragged batch (`specdec.reference.core.batch_loop`),
        each holding up to `capacity` tokens (`specdec.reference.drafters.slots`)."""

    def close(self) -> None:
        """Release what the drafter holds (nothing for most)."""


class DrafterBase:
    """Defaults of the protocol: a chain drafter that reads nothing from the target, judges its
    own confidence, counts no arithmetic and is estimated by replaying it token by token."""

    needs: Needs = NOTHING
    deterministic = False
    tree = False
    fallback = True
    max_draft: int | None = None
    draft_model: torch.nn.Module | None = None  # a model that drafts every slot in one forward (serve-bench times it)

    def c_hat(self, target_flops: float) -> float:
        return 0.0

    def max_nodes(self, gamma: int) -> int:
        """The most draft tokens one proposal at draft length gamma feeds the target (a tree: its
        nodes; what a ragged batch's slot and its pass timing must hold)."""
        return gamma

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int,
                              generator: torch.Generator | None) -> "DraftScorer":
        from specdec.reference.estimate.teacher_forced import ProtocolScorer
        return ProtocolScorer(self, max_gamma, generator)

    def fork(self) -> "DrafterBase":
        """A shallow copy: the model is shared, and `start` rebinds every per-sequence attribute."""
        return copy.copy(self)

    def slots(self, rows: int, capacity: int) -> "DraftSlots":
        """One fork per slot, drafting in turn."""
        return Forked([self.fork() for _ in range(rows)])

    def snapshot(self) -> object:
        """The per-sequence state as a value, for `restore` (a study that tries several drafts from
        one position and goes back); drafters that offer it override both."""
        raise NotImplementedError(f"{type(self).__name__} offers no snapshot")

    def restore(self, state: object) -> None:
        """Return to a `snapshot`."""
        raise NotImplementedError(f"{type(self).__name__} offers no snapshot")

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NoDrafter(DrafterBase):
    """Proposes nothing: the decode loop with it is plain autoregressive decoding."""

    deterministic = True

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        pass

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        return Proposal.empty()

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        pass


def build_drafter(arg: str | None, target, **place) -> tuple[NoDrafter, None]:
    """The registry's builder of kind "none" (`specdec.reference.drafters.spec.DRAFTER_KINDS`)."""
    return NoDrafter(), None
