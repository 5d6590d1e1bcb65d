"""The values that cross the decoder's seams, as vLLM's proposer -> scorer -> rejection sampler:

    policy.budget(slot)                  -> k_max (`specdec.reference.core.policy`)
    drafter.propose(k_max, ..., keep_going=policy.keep_going)
                                         -> Proposal(tokens, q | None, parents | None)
    scorer.score(proposal, drafter.needs) -> Scored(logits, hidden | None, layers | None)
    rule(scored.logits, proposal, ...)   -> Verdict(n_accepted, tokens, bonus, path | None)
    scorer.commit(verdict); drafter.commit(verdict, scored); policy.observe(verdict, slot)

Names follow Leviathan et al.: p is the target's distribution, q the draft's. Nothing else
passes between drafter, scorer and verifier (no hooks, no shared counters): a drafter that
reads the target's hidden states declares it in `needs` and receives them in `commit`.
The architecture: docs/architecture.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.reference.core.tree import depths


@dataclass(frozen=True)
class Needs:
    """What a drafter reads from the target's passes besides the logits (the scorer computes
    nothing more than asked, so the baseline pays nothing).

    hidden: the final hidden state (the output layer's input) of every position a pass feeds.
    layers: the hidden states these indices select from the model's `hidden_states` output
        (0 = the input embeddings, i = after decoder layer i; EAGLE-3 fuses low, middle and
        high layers), of every position a pass feeds.
    """

    hidden: bool = False
    layers: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return self.hidden or bool(self.layers)


NOTHING = Needs()


@dataclass
class Proposal:
    """Drafted tokens and the draft distributions they were drawn from.

    tokens: LongTensor [k], 0 <= k <= gamma (a drafter may propose fewer, even none).
    q: float32 [k, vocab], q[i] is the adjusted draft distribution token i was drawn from;
       None for a deterministic drafter (q[i] is one-hot at tokens[i]).
    parents: several drafts as one token tree (`specdec.reference.core.tree`): parents[i] is
       node i's parent node, -1 for a first token; None = one draft, a chain. Trees are
       verified greedily at temperature 0, and by recursive rejection over siblings at
       temperature > 0 when their drafts are deterministic (q None).
    """

    tokens: torch.Tensor
    q: torch.Tensor | None = None
    parents: list[int] | None = None

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def depth(self) -> int:
        """Draft positions: the longest draft of a tree, else the length."""
        if self.parents is None:
            return len(self)
        return max(depths(self.parents), default=0)

    @classmethod
    def empty(cls) -> "Proposal":
        return cls(torch.empty(0, dtype=torch.long))


@dataclass
class Scored:
    """One target pass, as the loop and (in `commit`) the drafter see it.

    logits: [n, vocab]: row i predicts the token after the i-th of the last n positions fed.
        In a verification pass n = k + 1: row 0 follows the pending token, row 1 + i draft
        (or tree node) i. After the prefill (prompt but its last token), n = 1: the row that
        predicts the prompt's last token.
    hidden: [m, d] or None (unless `Needs.hidden`): the final hidden state of every position
        fed (m >= n: the pending tokens too); its last n rows belong to the n logits rows.
    layers: [m, L, d] or None (unless `Needs.layers`): the selected hidden states, same rows.
    """

    logits: torch.Tensor
    hidden: torch.Tensor | None = None
    layers: torch.Tensor | None = None

    def hidden_of(self, row: int) -> torch.Tensor:
        """[d]: the final hidden state under which logits row `row` was computed."""
        if self.hidden is None:
            raise ValueError("this pass kept no hidden states: the drafter must declare Needs(hidden=True)")
        return self.hidden[self.hidden.shape[0] - self.logits.shape[0] + row]


NO_PASS = Scored(torch.empty(1, 0))  # handed to `commit` where no target pass ran (replays, draft timing)


@dataclass
class Verdict:
    """Outcome of verifying one proposal (vLLM's terms: accepted, recovered and bonus tokens).

    n_accepted: how many drafted tokens were accepted (0..k; for a tree, the accepted path's length).
    tokens: LongTensor [n_accepted + 1]: the accepted drafts, then one token drawn from the
        target side (recovered after a rejection, or the bonus token after full acceptance).
    bonus: True when every draft was accepted and the last token is the bonus from p_{k+1}
        (for a tree: the accepted path ends in a leaf).
    path: for a tree, the accepted nodes from the root (n_accepted of them); None for a chain.
    """

    n_accepted: int
    tokens: torch.Tensor
    bonus: bool
    path: list[int] | None = None

    @property
    def last_row(self) -> int:
        """The row of the verification pass's logits that produced the last emitted token
        (its hidden state is what a hidden-state drafter drafts the next block from)."""
        if self.path is not None:
            return 1 + self.path[-1] if self.path else 0
        return self.n_accepted
