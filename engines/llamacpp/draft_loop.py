"""What a draft model costs inside llama-server's speculative loop (`--spec-type draft-simple`),
which is not its own plain step t_d(1): per target step the draft makes

- one pass over the batch the target just verified (`common_speculative_process`: the last
  sampled token and the step's k - 1 drafts, last logits only; the "[TAG_SPEC_AVOID_DRAFT_REEVAL]"
  re-evaluation in tools/server/server-context.cpp), on every step, drafted or not;
- when it drafts, one look over the token the target sampled and one after each drafted token
  but a draft's last when its length stopped it (common/speculative.cpp, draft-simple's `draft()`),
  each a one-token pass followed by its top-10 sampler, and a failed look at p-min > 0.

So a request's draft seconds are

    P0 S + P1 G + s Q,

S the target's steps, G drafted tokens, Q looks (`validation.draft_counts`), P0 the batch pass over
one token, P1 each token more in it, s a look. The three are timed on the cost prompt
(`costs.measure --draft GGUF`) by servers running the target with the draft: at
`--spec-draft-n-max m --spec-synth-rates 0,...,0` for m = 1..M (every draft rejected: each step
drafts m tokens in m looks and verifies m + 1) and at `--spec-draft-p-min 2` (a look that always
fails: one look and a one-token batch pass a step, the last step none: one token left, nothing to
draft). A sample's draft seconds are its decode time less the target's part, its steps priced at
t(k) timed in the same repeat (paired: the machine's drift cancels), and (P0, P1, s) the least
squares over the samples, each weighted per step. A cost file without these (before 2026-11-28)
prices every pass at t_d(1): P0 = s = t_d(1), P1 = 0.

A request's counts are read from its counters and trace, which do not say where its token budget
ran out: its last step (one token left: nothing to draft) counts as an attempt at p-min > 0, and a
draft cut to the tokens left (`get_n_draft_max`) as stopped by p-min, one look more each; at most
a few looks a request (~1 % of a 64-token request's draft time here). The timed samples are counted
exactly (`sample_counts`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from specdec.engines.llamacpp.server import ServerConfig
from specdec.errors import SpecdecError

if TYPE_CHECKING:
    from specdec.engines.llamacpp.validation import Config, Record

FAILING_P_MIN = 2.0  # above any probability: every look fails (llama.cpp reads --spec-draft-p-min with stof, no range)


def loop_config(model: Path, draft: Path, m: int, ctx: int, threads: int | None) -> ServerConfig:
    """The target with the draft: m drafts a step, all rejected (m >= 1), or none drafted (m = 0)."""
    extra = ("--spec-draft-model", str(draft), "--spec-draft-n-max", str(max(m, 1)),
             "--spec-draft-p-min", f"{FAILING_P_MIN:g}" if m == 0 else "0",
             "--spec-synth-rates", ",".join(["0"] * max(m, 1)))
    return ServerConfig(model, spec_type="draft-simple", ctx_size=ctx, threads=threads, extra=extra)


def sample_counts(m: int, steps: int, draft_tokens: int) -> tuple[int, int, int]:
    """(S, G, Q) of a timed loop sample (module doc)."""
    if m == 0:
        return steps, 0, max(steps - 1, 0)
    return steps, draft_tokens, draft_tokens


def target_part(steps: int, drafts: int, draft_tokens: int, t_row: Sequence[float]) -> float:
    """The target's seconds in a sample: its plain steps at t(1), its verifies at t(1 + mean draft)."""
    grid = np.arange(1, len(t_row) + 1)
    verify = drafts * float(np.interp(1 + draft_tokens / drafts, grid, t_row)) if drafts else 0.0
    return (steps - drafts) * t_row[0] + verify


def fit(rows: Sequence[tuple[int, int, int, float]]) -> tuple[float, float, float]:
    """(P0, P1, s) from samples (S, G, Q, draft seconds): non-negative least squares, each sample
    weighted per step. The three are told apart only with samples at no draft (p-min 2) and at two
    draft lengths or more; otherwise an error, not an arbitrary split."""
    from scipy.optimize import nnls

    x = np.array([[S, G, Q] for S, G, Q, _ in rows], dtype=float)
    y = np.array([v for *_, v in rows], dtype=float)
    w = 1.0 / np.maximum(x[:, 0], 1.0)
    if np.linalg.matrix_rank(x * w[:, None]) < 3:
        raise SpecdecError("the draft's loop costs need samples at no draft and at two draft lengths or more "
                           "(`llamacpp costs --k` up to 3 at least)")
    coef, _ = nnls(x * w[:, None], y * w)
    return float(coef[0]), float(coef[1]), float(coef[2])


@dataclass(frozen=True)
class LoopCosts:
    """A draft's (P0, P1, s) at each timed context (linear in the context between, clamped)."""

    contexts: tuple[int, ...]
    parts: tuple[tuple[float, float, float], ...]

    @classmethod
    def from_file(cls, d: dict) -> "LoopCosts":
        return cls(tuple(int(x) for x in d["context_tokens"]),
                   tuple((float(a), float(b), float(c)) for a, b, c in zip(d["batch_pass"], d["per_token"], d["look"])))

    def at(self, context: float) -> tuple[float, float, float]:
        return tuple(float(np.interp(context, self.contexts, [p[i] for p in self.parts])) for i in range(3))


def loop_entry(contexts: Sequence[int], samples: dict[int, list[tuple[int, int, int, int, float]]]) -> dict:
    """The cost file's `loop` block of a draft: per context its fit and the samples (m, S, G, Q, seconds)."""
    parts = [fit([row[1:] for row in samples[i]]) for i in range(len(contexts))]
    return {"context_tokens": list(contexts), "batch_pass": [p[0] for p in parts],
            "per_token": [p[1] for p in parts], "look": [p[2] for p in parts],
            "samples": [samples[i] for i in range(len(contexts))]}


def draft_counts(record: Record, config: Config) -> tuple[float, float, float]:
    """(S, G, Q) of a request (module doc), from common/speculative.cpp: S = steps the target
    decoded (plain and verify), each followed by the draft's pass over its batch; G = draft tokens;
    Q = the draft's looks, attempts + G - F, attempts = D drafts plus, at p-min > 0, every plain
    step (an attempt that drafted nothing; at p-min 0 every attempt drafts), F = drafts that
    reached n_max (the trace's; untraced at p-min 0: all D)."""
    steps = max(record.tokens - 1, 1) - record.accepted
    attempts = record.drafts + (steps - record.drafts if config.p_min > 0 else 0)
    if record.lengths or not record.drafts:
        full = sum(record.lengths[config.n_max:])
    elif config.p_min > 0:
        raise SpecdecError(f"{config.label}: no traced draft lengths to price a p-min draft (LLAMA_TRACE)")
    else:
        full = record.drafts
    return steps, record.draft_tokens, attempts + record.draft_tokens - full


def draft_seconds(record: Record, config: Config, parts: tuple[float, float, float]) -> float:
    """P0 S + P1 G + s Q of a request at the draft's (P0, P1, s)."""
    return float(np.dot(parts, draft_counts(record, config)))
