"""llama-server's synthetic acceptance (`--spec-synth-rates P1,..,PK` or `--spec-synth-len L`),
draw for draw, so that a request's verify steps can be replayed from its output and its seed.

Read in the vendored llama.cpp 0c1e570: `common_speculative_synth_rates_resolve` and
`common_speculative_init` (common/speculative.cpp) turn the unconditional rates P_i into the
conditional p_i = P_i / P_(i-1) (P_0 = 1; 0 after a zero rate); `--spec-synth-len L` sets P_i = p^i
with p found by 32 bisections so that sum P_i = L - 1. Each request seeds its slot's own
`std::mt19937` with the request's `seed` (a random one when none is sent: then nothing can be
replayed), and `server_sample_and_accept_synth` (tools/server/server-context.cpp) draws, for draft
position i = 0, 1, ..., one `std::uniform_real_distribution<double>(0, 1)` number u and accepts
the drafted token when u < p_i and the token is not end-of-generation; the first refusal ends the
step (its draw spent), the target's own token taking its place. libstdc++ builds that double from
two 32-bit outputs, (lo + hi 2^32) / 2^64 (`generate_canonical<double, 53>`); numpy's MT19937
seeded by `_legacy_seeding` is the same generator (checked against g++ output, and end to end in
tests/test_llamacpp_ngram.py against a real server's counters)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from specdec.errors import SpecdecError

BISECTIONS = 32  # common_speculative_synth_rates_resolve's search for --spec-synth-len


def rates_from_length(length: float, n_max: int) -> list[float]:
    """The unconditional rates --spec-synth-len L gives at draft length n_max: p, p^2, ..., p^n_max
    with sum L - 1 (p by the engine's own bisection, so the doubles match)."""
    if not (1.0 <= length <= n_max + 1.0):
        raise SpecdecError(f"--spec-synth-len must be within [1, {n_max + 1}], got {length:g}")
    if length == n_max + 1.0:
        p = 1.0
    elif length > 1.0:
        lo, hi = 0.0, 1.0
        for _ in range(BISECTIONS):
            mid = 0.5 * (lo + hi)
            total, term = 0.0, mid
            for _ in range(n_max):
                total += term
                term *= mid
            lo, hi = (mid, hi) if total < length - 1.0 else (lo, mid)
        p = 0.5 * (lo + hi)
    else:
        p = 0.0
    rates, rate = [], p
    for _ in range(n_max):
        rates.append(rate)
        rate *= p
    return rates


def conditional(rates: Sequence[float]) -> list[float]:
    """p_i = P_i / P_(i-1), P_0 = 1 (0 after a zero rate), as `common_speculative_init` computes them."""
    out, prev = [], 1.0
    for rate in rates:
        out.append(rate / prev if prev > 0.0 else 0.0)
        prev = rate
    return out


def synthetic_rates(config, n_max: int) -> list[float] | None:
    """The unconditional rates a configuration (`validation.Config`) forces, None where its acceptance
    is the target's."""
    rates, length = config.flag("--spec-synth-rates"), config.flag("--spec-synth-len")
    if rates is not None:
        return [float(x) for x in rates.split(",")]
    return None if length is None else rates_from_length(float(length), n_max)


class SyntheticAcceptance:
    """One request's accept decisions: `accepted(draft, emitted)` is how many of `draft` the server
    accepted, where `emitted` is what it emitted from the draft's first position on (a check: an
    accepted token must be what it emitted, else the seed or the rates are not the server's)."""

    def __init__(self, rates: Sequence[float], seed: int, eog: frozenset[int] = frozenset()) -> None:
        self.p = conditional(rates)
        self.eog = eog
        self._bits = np.random.MT19937()
        self._bits._legacy_seeding(int(seed) & 0xFFFFFFFF)  # std::mt19937::seed(uint32_t)

    def uniform(self) -> float:
        lo, hi = (float(x) for x in self._bits.random_raw(2))
        u = (lo + hi * 2.0 ** 32) / 2.0 ** 64
        return u if u < 1.0 else float(np.nextafter(1.0, 0.0))

    def accepted(self, draft: Sequence[int], emitted: Sequence[int]) -> int:
        if len(draft) > len(self.p):
            raise SpecdecError(f"a draft of {len(draft)} tokens, longer than the {len(self.p)} synthetic rates")
        for i, token in enumerate(draft):
            if not (self.uniform() < self.p[i] and token not in self.eog):
                return i
            if i >= len(emitted) or emitted[i] != token:
                raise SpecdecError(f"synthetic replay: draft position {i} accepted, but the server emitted another "
                                   "token (not the server's seed or rates?)")
        return len(draft)


# llama_vocab's end-of-generation names (src/llama-vocab.cpp, `special_eog_ids`), besides the GGUF's eos/eot/eom
EOG_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
             "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
             "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>")


def eog_ids(client) -> frozenset[int]:
    """The served model's end-of-generation tokens: each of EOG_TEXTS and the server's eos that the
    server tokenizes as one special token."""
    eos = client.props().get("eos_token") or ""
    tokenized = [client.tokenize(text, parse_special=True) for text in {*EOG_TEXTS, eos} - {""}]
    return frozenset(t[0] for t in tokenized if len(t) == 1)
