"""specdec's predictions checked against llama-server: a grid of speculative configurations run
on the workload prompts, paired with no speculation, interleaved and repeated; per configuration
the measured speedup with a bootstrap interval, tokens per step, and prediction (a): the time the
steps the engine reported should take at the engine's own measured costs (`costs.py`).

Prediction (a), per request: n tokens decoded in n - 1 steps after the prompt (the first comes
with it), D of them verify steps with G draft tokens and A accepted (the server's /metrics
counters around the request), U = n - 1 - D - A plain steps:

    time = U t(1, L) + sum over drafts t(1 + K_d, L) + A c_acc,

t(k, L) the cost file's B = 1 table at the request's context L (linear in k between the timed
lengths and in L between the timed contexts), c_acc its cost per accepted token, K_d each draft's
own length: every speculative server runs traced (LLAMA_TRACE=1: "accepted a/n draft tokens" per
verify step), since the counters give only their sum G and t(k) is not linear — at f32 a verify's
second token costs ~0.5 of a step, its tenth ~0.2, so pricing D drafts at the mean length,
D t(1 + G / D, L), over-prices drafts of mixed lengths. Untraced records fall back to that. Predicted speedup = (sum (n - 1) t(1, L)) / (sum time)
over the cell's requests. Nothing is fitted on the grid: the costs come from their own run.
A draft model (`--spec-type draft-simple -md GGUF`) adds its passes as common/speculative.cpp
runs them, a pass over every batch the target decoded and its looks, priced as the cost file
timed them inside the loop (`draft_loop.py`); the draft's lengths, which the counters do not give,
come from the same trace, read per request.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from specdec.engines.counts import prometheus_counters
from specdec.engines.llamacpp.draft_loop import LoopCosts, draft_seconds
from specdec.engines.llamacpp.client import Client, Completion
from specdec.engines.llamacpp.config import ngram_flags
from specdec.engines.llamacpp.metrics import PER_POS, PREDICTED, PROMETHEUS
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig
from specdec.engines.llamacpp.trace import draft_lengths, traced_steps
from specdec.errors import SpecdecError

DRAFT_MODEL_FLAGS = ("--spec-draft-model", "-md", "--model-draft")  # this build's names (llama-server --help)
BOOTSTRAP = 2000  # resamples of the (prompt, repeat) pairs for the speedup's 95% interval
POSITIONS = 1024  # per-position counters kept (as many as a draft can be long)
DRAFT_TOP_K = 10  # draft-simple's sampler keeps the top 10 and softmaxes them: --spec-draft-p-min reads that
# The target's sampler at T > 0, sent with every request so that what a result records is what ran, not a build's
# defaults: llama-server's own defaults (common/common.h, common_params_sampling), applied before the temperature.
# The estimator's sampled continuations must come from the same truncation (`specdec estimate --top-k 40 --top-p
# 0.95 --min-p 0.05`): from the full distribution the model leaves an edit's copy within tokens, and the n-gram
# drafts that pay in the engine find nothing to copy (2026-11-27: 1.02 tokens a step against the engine's 1.5-1.7).
SAMPLER = {"top_k": 40, "top_p": 0.95, "min_p": 0.05}


@dataclass(frozen=True)
class Config:
    """One speculative configuration: a label and llama-server's flags for it."""

    label: str
    spec_type: str | None  # --spec-type; None: no speculation
    flags: tuple[str, ...] = ()  # the flags that set its draft length (and synthetic acceptance)

    def server(self, model: Path, threads: int | None, ctx: int) -> ServerConfig:
        env = (("LLAMA_TRACE", "1"),) if self.traced else ()
        return ServerConfig(model, spec_type=self.spec_type, threads=threads, ctx_size=ctx, extra=self.flags, env=env)

    @property
    def traced(self) -> bool:
        """A speculative server traces its verify steps: the drafts' lengths, which price them (module
        doc) and the draft model's looks (`draft_loop.draft_counts`)."""
        return self.spec_type is not None

    def flag(self, *names: str) -> str | None:
        """The value of the first of `names` among the flags (None: not given)."""
        for name in names:
            if name in self.flags[:-1]:
                return self.flags[self.flags.index(name) + 1]
        return None

    @property
    def synthetic(self) -> bool:
        """Whether its acceptance is forced (`--spec-synth-*`): a benchmark of the costs, whose
        output is not the target's."""
        return self.flag("--spec-synth-rates", "--spec-synth-len") is not None

    @property
    def p_min(self) -> float:
        """--spec-draft-p-min (this build's default: 0)."""
        return float(self.flag("--spec-draft-p-min", "--draft-p-min") or 0.0)

    @property
    def n_max(self) -> int:
        """--spec-draft-n-max (this build's default: 3)."""
        return int(self.flag("--spec-draft-n-max", "--draft-max", "--draft") or 3)

    def command_line(self) -> str:
        return " ".join(([] if self.spec_type is None else ["--spec-type", self.spec_type]) + list(self.flags))

    @property
    def draft_model(self) -> Path | None:
        """The draft model's GGUF (-md and its aliases), when it drafts with one."""
        name = self.flag(*DRAFT_MODEL_FLAGS)
        return None if name is None else Path(name)


def from_flags(label: str, flags: str) -> Config:
    """A configuration from a line of flags (`--spec-type T ...`), as a plan prints it."""
    words = flags.split()
    if "--spec-type" not in words:
        return Config(label, None, tuple(words))
    at = words.index("--spec-type")
    return Config(label, words[at + 1], tuple(words[:at] + words[at + 2:]))


def ngram(spec_type: str, gamma: int) -> Config:
    """An n-gram type drafting at most gamma tokens, with the flags `plan --from` prints for it
    (`specdec.engines.llamacpp.config.ngram_flags`)."""
    return from_flags(f"{spec_type} g{gamma}", ngram_flags(gamma)[spec_type])


def synthetic(gamma: int, p: float) -> Config:
    """Drafts from ngram-simple with a 1-token lookup (a draft almost every step, up to gamma long),
    each position accepted with conditional probability p whatever the tokens: unconditional rates
    p, p^2, ... (--spec-synth-rates; the acceptance is known, so (a) checks the costs alone)."""
    rates = ",".join(f"{p ** i:.6g}" for i in range(1, gamma + 1))
    return Config(f"synthetic p{p:g} g{gamma}", "ngram-simple",
                  ("--spec-ngram-simple-size-n", "1", "--spec-ngram-simple-size-m", str(gamma),
                   "--spec-synth-rates", rates))


def draft(gguf: Path, gamma: int, p_min: float = 0.0) -> Config:
    """llama.cpp's draft-model speculation: up to `gamma` tokens a step from the GGUF's greedy
    drafts, stopped at the first whose confidence (its top-10 renormalised probability) is below
    p_min (0: no cut, every draft gamma long)."""
    return Config(f"draft {gguf.stem} g{gamma}" + (f" p{p_min:g}" if p_min else ""), "draft-simple",
                  ("--spec-draft-model", str(gguf), "--spec-draft-n-max", str(gamma),
                   "--spec-draft-p-min", f"{p_min:g}"))


def default_grid() -> list[Config]:
    return [Config("none", None), synthetic(4, 0.8), synthetic(12, 0.8), ngram("ngram-simple", 4),
            ngram("ngram-simple", 16), ngram("ngram-mod", 8), ngram("ngram-mod", 32)]


@dataclass(frozen=True)
class Request:
    """What to send: a chat turn (through the server's chat template) or raw text."""

    name: str
    category: str
    text: str
    turn: bool


@dataclass
class Record:
    """One answered request and the server's counter deltas around it."""

    config: str
    temperature: float
    prompt: str
    category: str
    repeat: int
    tokens: int
    decode_ms: float
    prompt_tokens: int
    drafts: int
    draft_tokens: int
    accepted: int
    per_pos: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)  # drafts by length 0, 1, ... (traced servers; else empty)


def counters(client: Client) -> tuple[np.ndarray, np.ndarray]:
    """(drafts, draft tokens, accepted tokens), and the per-position counters as wide as the page
    lists them (the implementation's longest draft: what `plan --from` takes as k)."""
    totals, per_pos = prometheus_counters(client.metrics(), PROMETHEUS, PER_POS)
    head = np.array([totals.get(PROMETHEUS + "num_" + k, 0.0) for k in ("drafts", "draft_tokens", "accepted_tokens")])
    pos = np.zeros(min(len(per_pos), POSITIONS))
    for i, v in per_pos.items():
        if i < POSITIONS:
            pos[i] = v
    return head, pos


def counter_deltas(before: tuple[np.ndarray, np.ndarray], after: tuple[np.ndarray, np.ndarray]
                   ) -> tuple[list[int], list[int]]:
    """What `counters` grew by between two reads: (drafts, draft tokens, accepted tokens) and the
    per-position counters (as wide as the wider read: a page lists positions once they are reached)."""
    width = max(len(after[1]), len(before[1]))
    pos = np.pad(after[1], (0, width - len(after[1]))) - np.pad(before[1], (0, width - len(before[1])))
    return (after[0] - before[0]).astype(int).tolist(), pos.astype(int).tolist()


def send(client: Client, request: Request, new_tokens: int, temperature: float, seed: int, **options) -> Completion:
    options = {**SAMPLER, **options}
    if request.turn:
        return client.chat([{"role": "user", "content": request.text}], new_tokens, temperature=temperature, seed=seed,
                           **options)
    return client.complete(request.text, new_tokens, temperature=temperature, seed=seed, **options)


def run_grid(binary: Path, model: Path, configs: Sequence[Config], requests: Sequence[Request],
             temperatures: Sequence[float], repeats: int, new_tokens: int, threads: int | None,
             log: Callable[[str], None] = lambda line: None, seed: int = 0) -> list[Record]:
    """Every (config, temperature, prompt), `repeats` times. Each repeat and temperature starts fresh
    servers, all configurations alive at once (ngram-mod learns across requests: a repeat must not
    draft from the one before, nor T = 1 from the same prompt's answer at T = 0); per prompt the
    configurations' order rotates."""
    ctx = 8192
    records: list[Record] = []
    for r in range(repeats):
        turn = 0
        for temperature in temperatures:
            with ExitStack() as stack:
                # started from this thread: PR_SET_PDEATHSIG fires when the thread that forked the server ends
                servers = [stack.enter_context(LlamaServer(c.server(model, threads, ctx), binary)) for c in configs]
                clients = [Client(s.url) for s in servers]
                for c in clients:
                    c.complete("Hello", 4)  # warm-up, untimed: a fresh server's first request is slow
                for request in requests:
                    order = list(range(len(configs)))
                    order = order[turn % len(order):] + order[:turn % len(order)]
                    turn += 1
                    for i in order:
                        traced = configs[i].traced
                        before, logged = counters(clients[i]), len(servers[i].log_text()) if traced else 0
                        done = send(clients[i], request, new_tokens, temperature, seed=seed + 1000 * r + turn)
                        head, pos = counter_deltas(before, counters(clients[i]))
                        lengths = draft_lengths(traced_steps(servers[i], logged, head[0])) if traced else []
                        records.append(Record(configs[i].label, temperature, request.name, request.category, r,
                                              done.tokens, done.decode_ms, int(done.timings.get("prompt_n", 0)),
                                              *head, pos, lengths))
        log(f"repeat {r + 1}/{repeats} done")
    return records


# ---- the engine's costs, and prediction (a) -----------------------------------------------

@dataclass(frozen=True)
class EngineCosts:
    """The cost file's B = 1 rows: t(k, L) seconds for k = 1..K at the timed contexts."""

    contexts: tuple[int, ...]
    seconds: tuple[tuple[float, ...], ...]  # [n contexts][K]
    accept_seconds: float
    drafts: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...] = ()  # (GGUF, contexts, t_d(1) seconds)
    loops: tuple[tuple[str, LoopCosts], ...] = ()  # (GGUF, its costs in the speculative loop)

    @classmethod
    def from_file(cls, data: dict) -> "EngineCosts":
        tables = data["batch_timing"] if isinstance(data["batch_timing"], list) else [data["batch_timing"]]
        tables = sorted(tables, key=lambda t: t.get("context_tokens") or 0)
        rows = [tuple(t["seconds"][t["batch_sizes"].index(1)]) for t in tables]
        drafts = tuple((str(Path(name).resolve()), tuple(int(x) for x in d["context_tokens"]),
                        tuple(float(x) for x in d["seconds"])) for name, d in (data.get("draft_seconds") or {}).items())
        loops = tuple((str(Path(name).resolve()), LoopCosts.from_file(d.get("loop")))
                      for name, d in (data.get("draft_seconds") or {}).items() if d.get("loop"))
        return cls(tuple(int(t.get("context_tokens") or 0) for t in tables), tuple(rows),
                   max(0.0, float(data.get("accept_seconds") or 0.0)), drafts, loops)

    def t_draft(self, gguf: Path, context: float) -> float:
        """The draft model's own plain step t_d(1, L) in the engine (linear in L, clamped)."""
        for name, contexts, seconds in self.drafts:
            if name == str(Path(gguf).resolve()):
                return float(np.interp(context, contexts, seconds))
        raise SpecdecError(f"the cost file did not time the draft {gguf} (`specdec llamacpp costs --draft {gguf}`)")

    def draft_parts(self, gguf: Path, context: float) -> tuple[float, float, float]:
        """(P0, P1, s) of the draft in the loop (`draft_loop.py`); a file without them: every pass at t_d(1)."""
        for name, loop in self.loops:
            if name == str(Path(gguf).resolve()):
                return loop.at(context)
        t_d = self.t_draft(gguf, context)
        return t_d, 0.0, t_d

    def t(self, k: float, context: float) -> float:
        """t(k, L): linear in k (past the longest timed k: the last slope), linear in L (clamped)."""
        per_context = []
        for row in self.seconds:
            ks = np.arange(1, len(row) + 1)
            if k <= ks[-1]:
                per_context.append(float(np.interp(k, ks, row)))
            else:
                per_context.append(row[-1] + (row[-1] - row[-2]) * (k - ks[-1]))
        if len(per_context) == 1:
            return per_context[0]
        return float(np.interp(context, self.contexts, per_context))


def predicted_seconds(record: Record, costs: EngineCosts, config: Config | None = None) -> tuple[float, float]:
    """(prediction (a)'s time for the request's steps, the same tokens' time without speculation)."""
    steps = max(record.tokens - 1, 1)
    context = record.prompt_tokens + record.tokens / 2
    t1 = costs.t(1, context)
    plain = steps - record.drafts - record.accepted
    if sum(record.lengths) == record.drafts:  # traced: each draft at its own length
        verify = sum(n * costs.t(1 + k, context) for k, n in enumerate(record.lengths) if n)
    else:
        verify = record.drafts * costs.t(1 + record.draft_tokens / record.drafts, context)
    model = None if config is None else config.draft_model
    drafting = 0.0 if model is None else draft_seconds(record, config, costs.draft_parts(model, context))
    return plain * t1 + verify + record.accepted * costs.accept_seconds + drafting, steps * t1


@dataclass
class Cell:
    """One (configuration, temperature): measured against no speculation, and predicted."""

    config: str
    temperature: float
    measured: float  # no speculation's seconds per step / this configuration's, over every pair
    interval: tuple[float, float]  # 95% bootstrap over the (prompt, repeat) pairs
    predicted: float  # (a)
    tokens_per_step: float  # (tokens - 1) / steps, steps = plain + verify
    mean_draft: float | None
    pairs: int

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def cells(records: Sequence[Record], costs: EngineCosts, seed: int = 0,
          configs: Sequence[Config] = ()) -> list[Cell]:
    """Every (configuration, temperature) but "none", paired with "none" on (prompt, repeat);
    configs: the grid's, those that draft with a model priced with its passes too."""
    labels = {c.label: c for c in configs}
    rng = np.random.default_rng(seed)
    base = {(r.temperature, r.prompt, r.repeat): r for r in records if r.config == "none"}
    out = []
    keys = sorted({(r.config, r.temperature) for r in records if r.config != "none"},
                  key=lambda x: ([r.config for r in records].index(x[0]), x[1]))
    for label, temperature in keys:
        rows = [r for r in records if r.config == label and r.temperature == temperature
                and (temperature, r.prompt, r.repeat) in base]
        if not rows:
            continue
        pairs = [(base[(temperature, r.prompt, r.repeat)], r) for r in rows]
        b_ms = np.array([b.decode_ms for b, _ in pairs])
        b_steps = np.array([max(b.tokens - 1, 1) for b, _ in pairs])
        c_ms = np.array([c.decode_ms for _, c in pairs])
        c_steps = np.array([max(c.tokens - 1, 1) for _, c in pairs])

        def ratio(idx: np.ndarray) -> float:
            return float((b_ms[idx].sum() / b_steps[idx].sum()) / (c_ms[idx].sum() / c_steps[idx].sum()))

        everything = np.arange(len(pairs))
        boot = [ratio(rng.integers(0, len(pairs), len(pairs))) for _ in range(BOOTSTRAP)]
        predicted = [predicted_seconds(r, costs, labels.get(label)) for r in rows]
        steps = sum(max(r.tokens - 1, 1) - r.accepted for r in rows)
        drafts = sum(r.drafts for r in rows)
        out.append(Cell(label, temperature, ratio(everything), (float(np.percentile(boot, 2.5)),
                                                                float(np.percentile(boot, 97.5))),
                        sum(p[1] for p in predicted) / sum(p[0] for p in predicted),
                        sum(max(r.tokens - 1, 1) for r in rows) / steps,
                        sum(r.draft_tokens for r in rows) / drafts if drafts else None, len(pairs)))
    return out


def baselines(records: Sequence[Record], costs: EngineCosts) -> list[dict]:
    """Per temperature: no speculation's measured ms per step beside the cost file's t(1, L) for
    the same requests (the cost side's own check, before any speculation)."""
    out = []
    for temperature in sorted({r.temperature for r in records}):
        rows = [r for r in records if r.config == "none" and r.temperature == temperature]
        steps = sum(max(r.tokens - 1, 1) for r in rows)
        predicted = sum(predicted_seconds(r, costs)[1] for r in rows)
        out.append({"temperature": temperature, "measured_ms": sum(r.decode_ms for r in rows) / steps,
                    "cost_file_ms": 1000 * predicted / steps, "requests": len(rows)})
    return out


def metrics_page(records: Sequence[Record]) -> str:
    """The summed counters of `records` as a llama-server /metrics page (what `plan --from` reads)."""
    drafts = sum(r.drafts for r in records)
    lines = [f"{PREDICTED} {sum(r.tokens for r in records)}",
             f"{PROMETHEUS}num_drafts_total {drafts}",
             f"{PROMETHEUS}num_draft_tokens_total {sum(r.draft_tokens for r in records)}",
             f"{PROMETHEUS}num_accepted_tokens_total {sum(r.accepted for r in records)}"]
    width = max((len(r.per_pos) for r in records), default=0)
    for i in range(width):
        total = sum(r.per_pos[i] for r in records if i < len(r.per_pos))
        lines.append(f'{PER_POS}_total{{position="{i}"}} {total}')
    return "\n".join(lines) + "\n"


def as_dicts(records: Sequence[Record]) -> list[dict]:
    return [asdict(r) for r in records]
