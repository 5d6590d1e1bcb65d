"""llama.cpp's two n-gram drafters, rule for rule: `llamacpp:ngram-simple[:N]` and
`llamacpp:ngram-mod[:N]` propose what llama-server's `--spec-type ngram-simple` and `--spec-type
ngram-mod` draft on the same tokens, so specdec's estimator predicts those configurations from the
reference decoder alone (prediction (b) of the engine loop, docs/engines.md). gamma is the
engine's longest draft: `--spec-ngram-simple-size-m`, `--spec-ngram-mod-n-max`. The rules, read in
the vendored llama.cpp 0c1e570 (the sequence: every committed token, the last one the engine's
`sampled`):

- ngram-simple (`common_ngram_simple_draft`, common/ngram-map.cpp): the pattern is the last N
  tokens (`--spec-ngram-simple-size-n`, the engine's default 12); its latest earlier occurrence
  that ends at least two tokens before the pattern does (the one a token back is skipped; one at
  position 0 is never found); the draft is up to gamma tokens that followed it, never the sampled
  one; no draft when fewer than N could be copied, or while the sequence before the sampled token
  holds at most N + gamma + 1 tokens. No fallback to a shorter pattern: specdec's `lookup:N`
  falls back, so for N > 1 the two differ.
- ngram-mod (`common_speculative_impl_ngram_mod`, common/speculative.cpp; `common_ngram_mod`,
  common/ngram-mod.cpp): a table of 4 Mi entries from the hash of an N-token window
  (`--spec-ngram-mod-n-match`, default 24) to the token that followed it, the latest write
  winning, no key kept (a collision drafts another window's token, as the engine does). The
  prompt's windows are added at the start; the generated ones in chunks, when a draft is asked
  for and more than 32 tokens arrived since the last chunk. A draft chains lookups from the last
  N tokens, up to gamma; none when it stops before n_min tokens (`--spec-ngram-mod-n-min`; the
  engine's default is 48, the flags specdec prints set 1, this default).
  Not modelled: the engine's table is one per server, shared by every request it serves (here:
  one request's); its resets (a quarter full; five drafts in a row less than a quarter
  accepted) rebuild the table from the same request at the next draft, only without the chunk's
  lag.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from specdec.errors import SpecdecError
from specdec.reference.core.policy import KeepGoing
from specdec.reference.core.prompt import source_ids
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.seams import Proposal, Scored, Verdict
from specdec.reference.drafters.protocol import DrafterBase

MOD_ENTRIES = 4 * 1024 * 1024  # common_ngram_mod's table (speculative.cpp: `mod(n_match, 4*1024*1024)`)
MOD_CHUNK = 32  # new windows are added once more than this many tokens arrived
MOD_FULL = 0.25  # the table is cleared at a request's start when fuller than this
HASH_MUL = 6364136223846793005
MASK64 = (1 << 64) - 1


def _empty() -> Proposal:
    return Proposal(torch.empty(0, dtype=torch.long))


class _FollowsSequence(DrafterBase):
    """A deterministic drafter that reads the committed sequence, `tokens` (its last the engine's
    sampled token)."""

    deterministic = True
    tokens: list[int]

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        self.tokens = source_ids(prompt) + [int(t) for t in prompt]

    def commit(self, verdict: Verdict, scored: Scored) -> None:
        self.tokens.extend(verdict.tokens.tolist())


class NgramSimpleDrafter(_FollowsSequence):
    """llama.cpp's ngram-simple with a pattern of `size_n` tokens (see the module doc)."""

    def __init__(self, size_n: int = 12) -> None:
        if size_n < 1:
            raise SpecdecError(f"ngram-simple's pattern needs at least 1 token, got {size_n}")
        self.size_n = size_n
        self.tokens = []

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Deterministic: keep_going is not asked."""
        seq, n = self.tokens, self.size_n
        cur_len = len(seq) - 1  # the engine's history; seq[-1] is its sampled token
        if gamma < 1 or cur_len <= n + gamma + 1:
            return _empty()
        pattern = seq[cur_len - n + 1:]
        for j in range(cur_len - n - 1, 0, -1):
            if seq[j:j + n] == pattern:
                copy = min(gamma, cur_len - (j + n))
                return _empty() if copy < n else Proposal(torch.tensor(seq[j + n:j + n + copy], dtype=torch.long))
        return _empty()


class NgramModDrafter(_FollowsSequence):
    """llama.cpp's ngram-mod over windows of `n_match` tokens (see the module doc)."""

    def __init__(self, n_match: int = 24, n_min: int = 1) -> None:
        if n_match < 1 or n_min < 0:
            raise SpecdecError(f"ngram-mod needs n_match >= 1 and n_min >= 0, got {n_match}, {n_min}")
        self.n_match, self.n_min = n_match, n_min
        self.tokens = []
        self.table: dict[int, int] = {}  # index -> token (absent: the engine's EMPTY)
        self.i_last = 0  # windows starting before it are in the table

    @staticmethod
    def _index(window: Sequence[int]) -> int:
        h = 0
        for t in window:
            h = (h * HASH_MUL + int(t)) & MASK64
        return h % MOD_ENTRIES

    def _add(self, start: int, stop: int) -> None:
        """The windows starting at start .. stop - 1, each followed by its next token."""
        n, seq = self.n_match, self.tokens
        for i in range(start, stop):
            self.table[self._index(seq[i:i + n])] = seq[i + n]

    def start(self, prompt: Sequence[int], prefill: Scored | None = None) -> None:
        super().start(prompt, prefill)
        self.table, self.i_last = {}, 0
        if len(self.tokens) >= self.n_match:
            self._add(0, len(self.tokens) - self.n_match)
            self.i_last = len(self.tokens) - self.n_match
            if len(self.table) / MOD_ENTRIES > MOD_FULL:
                self.table = {}

    def propose(self, gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None) -> Proposal:
        """Deterministic: keep_going is not asked."""
        n, cur_len = self.n_match, len(self.tokens) - 1
        if gamma < 1 or cur_len < n:
            return _empty()
        if self.i_last + MOD_CHUNK < cur_len:
            self._add(self.i_last, cur_len - n)
            self.i_last = cur_len - n
        window = self.tokens[-n:]  # grows by each drafted token
        for i in range(gamma):
            token = self.table.get(self._index(window[i:i + n]))
            if token is None:
                if i < self.n_min:
                    return _empty()
                break
            window.append(token)
        return Proposal(torch.tensor(window[n:], dtype=torch.long))


def build_drafter(arg: str | None, target, **place) -> tuple[DrafterBase, None]:
    """The registry's builder of `llamacpp:ngram-simple[:N]` and `llamacpp:ngram-mod[:N[:MIN]]`."""
    from specdec.reference.drafters.spec import llamacpp_args

    kind, *numbers = llamacpp_args(arg)
    return (NgramSimpleDrafter(*numbers) if kind == "ngram-simple" else NgramModDrafter(*numbers)), None


def server_steps(drafter: DrafterBase, prompt: Sequence[int], emitted: Sequence[int], gamma: int,
                 accepted: Callable[[Sequence[int], Sequence[int]], int] | None = None) -> list[tuple[int, int]]:
    """(drafted, accepted) of every decode step llama-server ran to emit `emitted` after `prompt`
    at T = 0 with this drafter's type: the prompt's pass emits the first token; every step drafts
    from the sequence, cut to the tokens left but one (`server_slot::get_n_draft_max`), and
    accepts the drafts that equal what it emitted — or, with synthetic acceptance, as many as
    `accepted(draft, emitted from there)` says (`SyntheticAcceptance.accepted`, the server's own
    draws)."""
    greedy = SamplingConfig(temperature=0.0)
    drafter.start(list(prompt))
    drafter.commit(Verdict(0, torch.tensor(list(emitted[:1])), False), None)
    steps, i = [], 1
    while i < len(emitted):
        room = len(emitted) - i - 1
        draft = drafter.propose(gamma, greedy, None).tokens.tolist()[:room] if room > 0 else []
        if accepted is not None:
            n = accepted(draft, emitted[i:]) if draft else 0
        else:
            n = 0
            while n < len(draft) and draft[n] == emitted[i + n]:
                n += 1
        steps.append((len(draft), n))
        drafter.commit(Verdict(n, torch.tensor(list(emitted[i:i + n + 1])), n == len(draft) > 0), None)
        i += n + 1
    return steps
