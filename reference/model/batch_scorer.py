"""The target scorer for a ragged batch: B sequences, one target pass per iteration.

The batch form of `specdec.reference.model.target.TargetScorer` (SEAMS: the same seams with a
leading batch dimension and per-row verdicts). Every slot follows its own committed
sequence with its last token pending; `score` feeds every slot's pending token and drafts in
one pass over the `RaggedCache` and returns one `Scored` per slot (its k + 1 logits rows,
and hidden states when a drafter needs them); `commit(slot, verdict)` keeps that slot's
accepted drafts and nothing of the others'. A slot's drafts may be a token tree (the rows: the
pending token's, then one per node, as `TargetScorer`'s tree pass); its commit keeps the
verdict's path. Prompts are encoded alone (a batch-1 pass,
bit-for-bit the single-sequence prefill) and copied into their slot; a prompt seen before
is copied from the prefix store instead of encoded again (vLLM's automatic prefix caching).
"""
from __future__ import annotations

from typing import Sequence

import torch
from transformers import DynamicCache

from specdec.errors import SpecdecError
from specdec.reference.model.forward import forward, split_is_exact
from specdec.reference.model.placement import input_device, output_device
from specdec.reference.model.ragged_cache import RaggedCache
from specdec.reference.core.seams import NOTHING, Needs, Proposal, Scored, Verdict
from specdec.reference.core.tree import is_chain
from specdec.reference.model.seq2seq import with_cache


class BatchScorer:
    """`rows` slots of the target model, each holding up to `capacity` tokens."""

    def __init__(self, model: torch.nn.Module, rows: int, capacity: int, layout: str = "padded",
                 prefixes: dict | None = None, fuse_prefill: bool = False) -> None:
        self.model = model
        self.fuse_prefill = fuse_prefill  # True: a prompt is encoded in the slots' next pass, with the others
        self.device, self.output_device = input_device(model), output_device(model)
        self.dtype = next(model.parameters()).dtype
        self.cache = RaggedCache(model.config.num_hidden_layers, rows, capacity, layout)
        self.tokens: list[list[int]] = [[] for _ in range(rows)]
        self.committed = [0] * rows
        self.tree_nodes = [0] * rows  # nodes of a token tree a slot's cache holds past its sequence
        self.forward_passes = 0
        # prompt (but its last token) -> (per-layer keys and values, the pass, the layers the pass
        # holds); share one between scorers of the same model to encode each prompt once
        self._prefixes: dict[tuple[int, ...], tuple[list, Scored, tuple[int, ...]]] = {} if prefixes is None else prefixes

    @property
    def rows(self) -> int:
        return self.cache.rows

    @torch.inference_mode()
    def start(self, slot: int, prompt: Sequence[int], needs: Needs = NOTHING) -> Scored | None:
        """Slot `slot` begins `prompt`: everything but its last token is encoded (or copied from
        the prefix store) into the slot; returns that pass, as `TargetScorer.start` does. With
        fuse_prefill nothing is encoded now: the whole prompt goes with the next `score`, one
        pass for every slot that started (None is returned)."""
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise SpecdecError("the prompt must contain at least one token")
        if len(prompt) + 1 > self.cache.capacity:
            raise SpecdecError(f"a {len(prompt)}-token prompt does not fit a slot of {self.cache.capacity} tokens")
        self.tokens[slot], self.committed[slot], self.tree_nodes[slot] = prompt, len(prompt), 0
        head = tuple(prompt[:-1])
        if not head or self.fuse_prefill:
            self.cache.set_length(slot, 0)
            return None
        kept = self._prefixes.get(head)
        if kept is None or (needs.hidden and kept[1].hidden is None) or (needs.layers and kept[2] != needs.layers):
            cache = DynamicCache(config=self.model.config)
            logits, hidden, layers = forward(self.model, torch.tensor([head], device=self.device), 1, needs,
                                             **with_cache(self.model, cache))
            self.forward_passes += 1
            kept = ([(layer.keys[0], layer.values[0]) for layer in cache.layers],
                    Scored(logits[0], None if hidden is None else hidden[0], None if layers is None else layers[0]),
                    needs.layers)
            self._prefixes[head] = kept
        self.cache.store(slot, kept[0])
        return kept[1]

    @torch.inference_mode()
    def score(self, proposals: Sequence[Proposal | None], needs: Needs = NOTHING) -> list[Scored | None]:
        """One pass: slot i feeds its pending token(s) and proposals[i]'s drafts (None: the slot
        sits this pass out). Returns per slot Scored(logits [k + 1, vocab], hidden of its fed
        positions when needs.hidden), None for a slot that sat out."""
        if len(proposals) != self.rows:
            raise ValueError(f"one proposal per slot: got {len(proposals)} for {self.rows}")
        trees: list[list[int] | None] = [None] * self.rows
        for slot, proposal in enumerate(proposals):
            if proposal is not None:
                if proposal.parents is not None and not is_chain(proposal.parents):
                    trees[slot] = list(proposal.parents)
                    self.tree_nodes[slot] = len(proposal)
                self.tokens[slot].extend(proposal.tokens.tolist())
        busy = [slot for slot, proposal in enumerate(proposals) if proposal is not None]
        keep = None if needs else [len(proposals[slot]) + 1 for slot in busy]  # the logits rows alone
        logits, fed, layers, counts = self._feed(busy, needs, trees, keep)
        out: list[Scored | None] = [None] * self.rows
        at = 0
        for i, (slot, fed_n) in enumerate(zip(busy, counts)):
            k, n = len(proposals[slot]), fed_n if keep is None else keep[i]  # n: the slot's rows in the outputs
            out[slot] = Scored(logits[at + n - k - 1:at + n], fed[at:at + n] if needs.hidden else None,
                               None if layers is None else layers[at:at + n])
            at += n
        return out

    @torch.inference_mode()
    def next_logits(self, slots: Sequence[int]) -> torch.Tensor:
        """One pass feeding each of `slots` its tokens not yet in the cache (the others sit out);
        returns the logits after each one's last token: [len(slots), vocab] (a draft step; the
        output layer runs on those positions alone, as a single sequence's `n_logits=1` does)."""
        return self._feed(slots, NOTHING, keep=[1] * len(slots))[0]

    def append(self, slot: int, tokens: Sequence[int]) -> None:
        """Add tokens to the slot's sequence without a pass (the next pass feeds them)."""
        self.tokens[slot].extend(tokens)

    def _feed(self, slots: Sequence[int], needs: Needs, trees: Sequence[Sequence[int] | None] | None = None,
              keep: Sequence[int] | None = None
              ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, list[int]]:
        """One pass over every slot's tokens not yet in the cache, for `slots` (the rest sit out;
        trees[slot]: the parents of the token tree that ends its tokens, None: a chain).
        Returns the logits of every fed position [sum n, vocab], their final hidden states
        [sum n, d] (None unless needs.hidden or the output layer runs apart) and the layers
        needs.layers selects [sum n, L, d] (None unless asked), slot by slot, and each slot's
        count n. `keep`: the outputs at each slot's last keep[i] fed positions alone ([sum keep, ...]:
        a draft step's last row, a fused prefill's k + 1 rows)."""
        feeds: list[list[int]] = [[] for _ in range(self.rows)]
        for slot in slots:
            feeds[slot] = self.tokens[slot][self.cache.lengths[slot]:]
        plan = self.cache.layout_pass(feeds, self.dtype, self.device, trees)
        rows = [(plan.places[s][0], plan.places[s][1] + j) for i, s in enumerate(slots)
                for j in range(0 if keep is None else plan.places[s][2] - keep[i], plan.places[s][2])]
        index = torch.tensor(rows, device=self.device)
        kwargs = dict(position_ids=plan.position_ids, attention_mask=plan.mask, **with_cache(self.model, self.cache))
        layers = None
        if split_is_exact(self.model) and not needs.layers:  # the output layer on the fed positions only
            hidden = self.model.get_decoder()(input_ids=plan.input_ids, **kwargs).last_hidden_state
            fed = hidden[index[:, 0], index[:, 1]]  # [sum n, d]
            logits = self.model.get_output_embeddings()(fed).to(self.output_device)
        else:
            logits_all, hidden_all, layers_all = forward(self.model, plan.input_ids, 0, needs, **kwargs)
            logits = logits_all[index[:, 0], index[:, 1]]
            fed = None if hidden_all is None else hidden_all[index[:, 0], index[:, 1]]
            layers = None if layers_all is None else layers_all[index[:, 0], index[:, 1]]  # [sum n, L, d]
        self.forward_passes += 1
        counts = [len(feeds[slot]) for slot in slots]
        for slot, n in zip(slots, counts):
            self.cache.set_length(slot, self.cache.lengths[slot] + n)
        return logits, fed, layers, counts

    def rewind(self, slot: int, length: int) -> None:
        """Slot `slot` keeps the first `length` tokens of its sequence, the last one pending (the
        cost timing drops each timed pass's tokens so)."""
        if not 1 <= length <= self.committed[slot]:
            raise ValueError(f"cannot rewind a {self.committed[slot]}-token sequence to {length}")
        del self.tokens[slot][length:]
        self.committed[slot] = length
        self.cache.set_length(slot, length - 1)

    def commit(self, slot: int, verdict: Verdict) -> None:
        """Keep slot `slot`'s first n_accepted drafts, then append the verdict's last token (pending)."""
        tokens = verdict.tokens.tolist()
        n = verdict.n_accepted
        keep = self.committed[slot] + n
        if self.tree_nodes[slot]:  # the pass was a tree: keep the accepted path's entries
            if verdict.path is None:
                raise ValueError("a tree pass needs a verdict naming its accepted path")
            self.cache.keep_path(slot, self.committed[slot], verdict.path)
            self.tree_nodes[slot] = 0
            del self.tokens[slot][self.committed[slot]:]
            self.tokens[slot].extend(tokens)
        else:
            del self.tokens[slot][keep:]
            self.cache.set_length(slot, min(self.cache.lengths[slot], keep))
            self.tokens[slot].extend(tokens[n:])
        self.committed[slot] += len(tokens)


def slot_scorer(model: torch.nn.Module, rows: int, capacity: int, fuse_prefill: bool = False):
    """The target side of the decode step for `rows` slots of up to `capacity` tokens: one pass
    over the ragged cache for a Hugging Face causal LM (`BatchScorer`); one single-sequence scorer
    per slot, each slot's pass its own, for a model the ragged cache does not hold (an
    encoder-decoder's cross-attention; a module that writes no cache, such as the tests'
    context-free models). fuse_prefill: the prompts are encoded by the first step's pass."""
    from transformers import PreTrainedModel

    from specdec.reference.core.scorer import PerSlot
    from specdec.reference.model.seq2seq import is_encoder_decoder
    from specdec.reference.model.target import TargetScorer

    if isinstance(model, PreTrainedModel) and not is_encoder_decoder(model):
        return BatchScorer(model, rows, capacity, fuse_prefill=fuse_prefill)
    return PerSlot([TargetScorer(model) for _ in range(rows)], fuse_prefill)
