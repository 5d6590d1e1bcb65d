"""A neural drafter: any Hugging Face causal LM with its own KV cache (q is its distribution).

One sequence: `NeuralDrafter` (a KV session). B slots: `NeuralSlots`, the same model over a
ragged cache, drafting position by position with one forward pass for every slot still drafting,
so a step's draft cost is gamma passes whatever B.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch
from transformers import PreTrainedModel

from specdec.reference.model.batch_scorer import BatchScorer
from specdec.reference.model.kv_session import KVSession
from specdec.reference.model.models import flops_per_token
from specdec.reference.core.policy import DraftPolicy, KeepGoing
from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.core.seams import NOTHING, Proposal, Scored, Verdict
from specdec.reference.drafters.protocol import DrafterBase

if TYPE_CHECKING:
    from specdec.reference.estimate.teacher_forced import DraftScorer


def fit_vocab(logits: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Make draft logits [..., V_q] cover the target vocabulary [..., vocab_size].

    Extra draft rows (padding) are dropped; missing rows get -inf so q puts no mass there.
    """
    v = logits.shape[-1]
    if v == vocab_size:
        return logits
    if v > vocab_size:
        return logits[..., :vocab_size]
    pad = logits.new_full((*logits.shape[:-1], vocab_size - v), float("-inf"))
    return torch.cat([logits, pad], dim=-1)


class NeuralDrafter(DrafterBase):
    """Drafts autoregressively with a small causal LM; its cache is cropped on rejection."""

    def __init__(self, model: PreTrainedModel, vocab_size: int) -> None:
        self.session = KVSession(model)
        self.vocab_size = vocab_size

    @property
    def draft_model(self) -> PreTrainedModel:
        return self.session.model

    def fork(self) -> "NeuralDrafter":
        """The same draft model with a KV session of its own."""
        return NeuralDrafter(self.session.model, self.vocab_size)

    def slots(self, rows: int, capacity: int) -> "NeuralSlots":
        """The draft model for `rows` slots, drafting them all in each pass."""
        return NeuralSlots(self.session.model, self.vocab_size, rows, capacity)

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        self.session.start(prompt)

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Draft up to gamma tokens, until keep_going says stop (see
        specdec.reference.drafters.protocol.Drafter.propose)."""
        tokens: list[int] = []
        qs: list[torch.Tensor] = []
        for i in range(gamma):
            logits = fit_vocab(self.session.extend(tokens[-1:], n_logits=1).logits[0], self.vocab_size)  # [vocab]
            if generator is not None:  # q is drawn, and verified, where the target's logits are
                logits = logits.to(generator.device)
            if keep_going is not None and not keep_going(i, logits.float().softmax(-1)):
                break  # hand over to the target (this position's token is not drafted)
            q = sampling.probs(logits)  # [vocab]
            x = int(q.argmax()) if sampling.greedy else int(sample(q, generator))
            tokens.append(x)
            qs.append(q)
        # the session now holds committed + tokens[:-1] (committed + tokens after an early
        # stop); commit crops whatever it holds beyond the accepted drafts
        q_all = None if sampling.greedy or not qs else torch.stack(qs)  # [k, vocab]
        return Proposal(torch.tensor(tokens, dtype=torch.long), q_all)

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        self.session.commit(verdict)

    def c_hat(self, target_flops: float) -> float:
        return flops_per_token(self.session.model) / target_flops

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int,
                              generator: torch.Generator | None) -> "DraftScorer":
        from specdec.reference.estimate.teacher_forced import NeuralScorer
        return NeuralScorer(self.session.model)


class NeuralSlots:
    """The draft model for B slots (`specdec.reference.drafters.slots.DraftSlots`): position i of
    every slot still drafting comes from one pass; request s samples with its own generator."""

    needs = NOTHING

    def __init__(self, model: PreTrainedModel, vocab_size: int, rows: int, capacity: int) -> None:
        self.draft = BatchScorer(model, rows, capacity)  # the slots' sequences, committed + drafted
        self.vocab_size = vocab_size

    def start(self, slot: int, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        self.draft.start(slot, prompt)

    def propose(self, rooms: Sequence[int | None], sampling: SamplingConfig,
                generators: Sequence[torch.Generator | None], policy: DraftPolicy) -> list[Proposal | None]:
        drafting = [s for s, room in enumerate(rooms) if room]
        tokens: dict[int, list[int]] = {s: [] for s in drafting}
        qs: dict[int, list[torch.Tensor]] = {s: [] for s in drafting}
        device = next((g.device for g in generators if g is not None), None)  # q is drawn where p is
        for i in range(max((rooms[s] for s in drafting), default=0)):
            logits = fit_vocab(self.draft.next_logits(drafting), self.vocab_size)  # [A, vocab]
            if device is not None:
                logits = logits.to(device)
            if policy.stops_early:  # the policy's keep_going per slot: a slot told to stop drafts no more
                unadjusted = logits.float().softmax(-1)
                keep = [a for a, s in enumerate(drafting) if policy.keep_going(i, unadjusted[a], s)]
                drafting, logits = [drafting[a] for a in keep], logits[keep]
            if not drafting:
                break
            q, x = draw(self.draft, drafting, logits, sampling, [generators[s] for s in drafting])  # [A, vocab]
            for a, s in enumerate(drafting):
                tokens[s].append(x[a])
                qs[s].append(q[a])
            drafting = [s for s in drafting if len(tokens[s]) < rooms[s]]
            if not drafting:
                break
        out: list[Proposal | None] = [None if room is None else Proposal.empty() for room in rooms]
        for s, drafted in tokens.items():
            q_all = None if sampling.greedy or not drafted else torch.stack(qs[s])  # [k, vocab]
            out[s] = Proposal(torch.tensor(drafted, dtype=torch.long), q_all)
        return out

    def commit(self, slot: int, verdict: Verdict, scored: Scored) -> None:
        self.draft.commit(slot, verdict)


def draw(scorer: BatchScorer, slots: Sequence[int], logits: torch.Tensor, sampling: SamplingConfig,
         generators: Sequence[torch.Generator | None]) -> tuple[torch.Tensor, list[int]]:
    """One drafted position of `slots` from their logits [A, vocab]: q [A, vocab] and each slot's
    token (the argmax, or a draw with its own generator), appended to its sequence for the next
    pass to feed. With `BatchScorer.next_logits` before it, the whole of a draft step: serve-bench
    times t_d(B, k) through these two calls (`time_batched_passes(..., draft_step=True)`)."""
    q = sampling.probs(logits)
    x = (q.argmax(-1) if sampling.greedy else sample(q, list(generators))).tolist()
    for a, s in enumerate(slots):
        scorer.append(s, [x[a]])
    return q, x


def build_drafter(arg: str, target, device: str = "cpu", dtype: str = "float32", device_map=None
                  ) -> tuple[NeuralDrafter, str | None]:
    """The registry's builder of `model:PATH`: the draft model on the target's backend, on `device`
    or spread by `device_map`; the note says how the vocabularies were reconciled."""
    from specdec.reference.model.models import check_pair, load_model

    draft = load_model(arg, device=device, dtype=dtype, backend=target.backend, device_map=device_map)
    note = check_pair(target, draft)
    return NeuralDrafter(draft.model, vocab_size=target.vocab_size), note
