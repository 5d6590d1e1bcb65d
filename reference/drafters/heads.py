"""The heads drafter: blockwise parallel heads on the target's own last pass (BPD's
Predict / Verify / Accept with the target as its own drafter; docs/heads.md).

The pass that verifies a block also gives the hidden state h under the token y the decoder
then commits (the scorer returns it: `needs` asks for the final hidden states); the heads
draft the block after y from (h, y) with no pass of their own. The prefill pass (the prompt
but its last token) ends with h under the prompt's last token, so the first iteration drafts
too; with a fused prefill there is no such pass and it drafts nothing.
"""
from __future__ import annotations

from typing import Sequence

import torch

from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.sampling import SamplingConfig, sample
from specdec.reference.core.seams import Needs, Proposal, Scored, Verdict
from specdec.reference.drafters.protocol import DrafterBase
from specdec.reference.heads.model import BlockHeads


class HeadsDrafter(DrafterBase):
    """Drafts up to H tokens per iteration from the target's last hidden state.

    vocab_size: rows of the target's output layer (q's width).
    """

    needs = Needs(hidden=True)

    def __init__(self, heads: BlockHeads, vocab_size: int) -> None:
        self.heads = heads
        self.vocab_size = vocab_size
        self.hidden: torch.Tensor | None = None  # [d], h under the last committed token
        self.token: int | None = None  # y, the last committed token

    @property
    def max_draft(self) -> int:
        return self.heads.n_heads

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        """Begin `prompt`; h comes from the target's prefill pass, if there was one."""
        self.token = int(prompt[-1]) if len(prompt) else None
        self.hidden = None if prefill is None else prefill.hidden_of(0)

    @torch.inference_mode()
    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Each head's argmax at temperature 0; at T > 0 a draw from each head's adjusted q_i.
        Stops before the first head whose unadjusted q_i keep_going turns down."""
        k = min(gamma, self.heads.n_heads)
        if self.hidden is None or k <= 0:
            return Proposal.empty()
        token = torch.tensor([self.token], dtype=torch.long, device=self.hidden.device)
        restricted = self.heads(self.hidden[None], token, k)[0]  # [k, V']
        if keep_going is not None:
            q_raw = restricted.softmax(-1)  # [k, V'] unadjusted
            k = next((i for i in range(k) if not keep_going(i, q_raw[i])), k)
            restricted = restricted[:k]
        if sampling.greedy:
            tokens, q = self.heads.vocab[restricted.argmax(-1)], None
        else:
            q = sampling.probs(self.heads.full_logits(restricted, self.vocab_size))  # [k, vocab]
            tokens = sample(q, generator) if k else torch.empty(0, dtype=torch.long)
        return Proposal(tokens.to(torch.long).cpu().reshape(-1), q)

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        """The last committed token y came from the verification pass's row verdict.last_row,
        whose hidden state drafts the next block."""
        self.hidden = scored.hidden_of(verdict.last_row)
        self.token = int(verdict.tokens[-1])

    def c_hat(self, target_flops: float) -> float:
        """One head's residual block and restricted output layer per drafted token."""
        d = self.heads.hidden_size
        return (2 * d * 2 * d + 2 * d * self.heads.vocab.numel()) / target_flops

    def teacher_forced_scorer(self, target: torch.nn.Module, max_gamma: int,
                              generator: torch.Generator | None):
        from specdec.reference.estimate.heads_scorer import HeadsScorer
        return HeadsScorer(target, self.heads, max_gamma)


def build_drafter(arg: str, target, device: str = "cpu", dtype: str = "float32", device_map=None
                  ) -> tuple[DrafterBase, str]:
    """The registry's builder of `heads:PATH[,k=K,p=P,...]`: the heads' chain, or with options the
    p best paths of their top-k lattice, rescored by an n-gram or an LM of the target's vocabulary."""
    from specdec.reference.drafters.factory import require_output_layer
    from specdec.reference.drafters.spec import heads_args
    from specdec.reference.heads.store import load_heads

    path, options = heads_args(arg)
    require_output_layer(target, "heads draft")
    heads, _ = load_heads(path, target.model, target.path)
    if target.backend == "fast":
        from specdec.reference.model.backend import use_backend
        use_backend(heads, "fast")
    note = f"{heads.n_heads} heads over {heads.vocab.numel()} ids (drafts at most {heads.n_heads} tokens)"
    if not options:
        return HeadsDrafter(heads, target.vocab_size), note
    from specdec.reference.drafters.lattice import LatticeDrafter
    rescorer, what = None, ""
    if "ngram" in options:
        from specdec.ngram.model import NgramModel
        rescorer, what = NgramModel.load(options["ngram"], target.vocab_size), "n-gram"
    elif "lm" in options:
        from specdec.reference.model.models import check_pair, load_model
        from specdec.reference.heads.lm_rescorer import LMRescorer
        lm = load_model(options["lm"], device=device, dtype=dtype, backend=target.backend, device_map=device_map)
        note += "; " + (check_pair(target, lm) or "rescorer vocabulary matches")
        rescorer, what = LMRescorer(lm.model, target.vocab_size), "LM"
    local = options.get("rescore") == "local"
    k, p, w = options.get("k", 4), options.get("p", 1), options.get("w", 1.0 if rescorer is not None else 0.0)
    how = (f"the path of the top-{k} lattice chosen left to right (local rescoring)" if local
           else f"the {p} best paths of the top-{k} lattice")
    return LatticeDrafter(heads, target.vocab_size, k, p, rescorer, w, local), (
        note + f"; {how}" + (f", {what} weight {w:g}" if rescorer is not None else ""))
