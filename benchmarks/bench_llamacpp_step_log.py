"""Every step of one streams round, read from llama-server's own log and priced by the equal split:
where does a batch check's step time go? One round of B streams (`engines/llamacpp/streams.py`, the
check's servers, prompts and seeds) on no speculation and on one configuration, each server logging
with timestamps at debug level (`--log-timestamps -lv 5`); per step, the slots' feeds (the pending
token, plus the drafts of a slot that drafted: "handle_last_" lines; 0 for a slot that is idle or
between requests) and the decode's time (from "n_batch (effective)" to the end of the decode's
yield); each step priced as `specdec.simulator.equal_split.split_decodes` cuts it, u(r, m) from the
cost file (the configuration's mixed steps where timed: `batches.speculating_ubatches`; those are
whole steps as a client times them, sampling and drafting included, where the log's time is the
decode's alone, so a price reads a little high). Printed:
measured against priced per number of drafting slots, the steps with idle slots priced as they ran
and as if those slots had decoded, and how often a slot drafts by its position in the request and
by the request's kind (timed, or the shorter untimed lead-ins and fillers: `--filler-share`).

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_step_log.py \\
        --model GGUF --costs COSTS.json [--config "ngram-simple g4"] [--batch-size 8] [--temperature 1]

The AVX-512 EPYC at f32 (2026-11-29): benchmarks/data/llamacpp/batches/step-log-f32-epyc.txt.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import numpy as np

from specdec.engines.llamacpp import batches, streams
from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, find_binary
from specdec.engines.llamacpp.streams import save_prompts, slots_server, stream_round
from specdec.engines.llamacpp.validation import Config, Request, from_flags, ngram
from specdec.reference.data.workloads import workload_prompts
from specdec.simulator.equal_split import split_decodes, ubatch_seconds

LOG_FLAGS = ("--log-timestamps", "-lv", "5")
STAMP = re.compile(r"^(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) ")
FEED = re.compile(r"handle_last_: id\s+(\d+) \|.*?(slot decode token|generate_draft: .*?#draft=(\d+))")
TOKEN = re.compile(r"process_toke: id\s+(\d+) \| task (\d+) \| n_gen = (\d+)")
HANDLE = re.compile(r"handle_last_: id\s+(\d+) \| task (\d+) \| (slot decode token|generate_draft)")
WIDTH = 16  # tokens of a position bucket (`drafting_shares`)
PROMPT = re.compile(r"id\s+(\d+) \| task \d+ \| cached n_tokens = \d+, memory_seq_rm \[\d+, end\)")


def stamped(path: Path) -> list[tuple[float, str]]:
    """(seconds, line) of every timestamped line of a server log."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if m := STAMP.match(line):
            minutes, seconds, ms, us = (int(g) for g in m.groups())
            out.append((minutes * 60 + seconds + ms / 1e3 + us / 1e6, line))
    return out


def steps(lines: list[tuple[float, str]], B: int, after: float) -> tuple[list[tuple[float, tuple[int, ...]]], int]:
    """(decode seconds, feeds per slot) of every decode that starts after `after` seconds, and how
    many such decodes were left out (no end of the decode's yield in the log). A slot starting a
    request feeds its restored prompt's last token (the "cached n_tokens" line: 1)."""
    out, feeds, dropped = [], {}, 0
    for i, (t, line) in enumerate(lines):
        if m := FEED.search(line):
            feeds[int(m.group(1))] = 1 + int(m.group(3) or 0)
        elif m := PROMPT.search(line):
            feeds.setdefault(int(m.group(1)), 1)
        elif "n_batch (effective)" in line:
            if t > after and feeds:
                end = next((lines[j][0] for j in range(i, len(lines)) if "done yielding" in lines[j][1]), None)
                if end is None:
                    dropped += 1
                else:
                    out.append((end - t, tuple(feeds.get(s, 0) for s in range(B))))
            feeds = {}
    return out, dropped


def drafting_shares(lines: list[tuple[float, str]], after: float, new_tokens: int
                    ) -> tuple[dict[int, tuple[int, int]], dict[str, tuple[int, int]]]:
    """(slot steps, drafting ones) after `after` seconds, by how far into its request the slot is
    ({first token of a bucket of WIDTH: ...}, n_gen) and by the length of its request ({kind: ...}:
    new_tokens — the timed requests, and the fillers at `--filler-share 1` — or shorter: the
    lead-ins, and the fillers at a share below 1)."""
    generated, seen = {}, []  # (slot, task) -> n_gen; (task, n_gen, drafted) per slot step
    for t, line in lines:
        if m := TOKEN.search(line):
            generated[m.group(1), m.group(2)] = int(m.group(3))
        elif t > after and (m := HANDLE.search(line)):
            seen.append((m.group(2), generated.get((m.group(1), m.group(2)), 0), m.group(3) == "generate_draft"))
    longest = defaultdict(int)
    for task, n_gen, _ in seen:
        longest[task] = max(longest[task], n_gen)
    by_position, by_kind = defaultdict(lambda: [0, 0]), defaultdict(lambda: [0, 0])
    for task, n_gen, drafted in seen:
        for bucket in (by_position[WIDTH * (n_gen // WIDTH)],
                       by_kind[f"{new_tokens} tokens" if longest[task] >= new_tokens - 1 else "shorter"]):
            bucket[0] += 1
            bucket[1] += drafted
    return ({k: (v[0], v[1]) for k, v in sorted(by_position.items())},
            {k: (v[0], v[1]) for k, v in sorted(by_kind.items())})


def report(label: str, rows: list[tuple[float, tuple[int, ...]]], u: np.ndarray) -> list[str]:
    """Measured against priced: every step, the steps with at least B - 2 slots decoding by their
    number of drafting slots, and those with idle slots also as if the idle ones had decoded."""
    def price(feeds: tuple[int, ...]) -> float:
        return sum(u[r - 1, m - 1] for r, m in split_decodes(feeds))

    def ms(values) -> str:
        return f"{1e3 * statistics.mean(values):6.1f}"

    B = len(rows[0][1])
    busy = [(d, f) for d, f in rows if sum(x > 0 for x in f) >= B - 2]
    idle = [(d, f) for d, f in busy if 0 in f]
    out = [f"{label}: {len(rows)} steps, measured {sum(d for d, _ in rows):.2f} s, priced "
           f"{sum(price(f) for _, f in rows):.2f} s"]
    drafting = defaultdict(list)
    for d, f in busy:
        if 0 not in f:
            drafting[sum(x > 1 for x in f)].append((d, f))
    for n, v in sorted(drafting.items()):
        out.append(f"  {n} drafting slots: {len(v):4d} steps, measured {ms(d for d, _ in v)} ms, "
                   f"priced {ms(price(f) for _, f in v)}")
    if idle:
        decoded = ms(price(tuple(x or 1 for x in f)) for _, f in idle)
        out.append(f"  1-2 slots idle: {len(idle):4d} steps, measured {ms(d for d, _ in idle)} ms, priced "
                   f"{ms(price(f) for _, f in idle)}, as if they had decoded {decoded}")
    if busy:
        out.append(f"  at least {B - 2} of {B} slots decoding: {len(busy)} steps, measured {ms(d for d, _ in busy)} "
                   f"ms, priced as if every slot decoded {ms(price(tuple(x or 1 for x in f)) for _, f in busy)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="the target's GGUF")
    ap.add_argument("--costs", type=Path, required=True, help="its cost file (`specdec llamacpp costs`)")
    ap.add_argument("--config", default="ngram-simple g4", help="LABEL=FLAGS, or 'ngram-simple gN'")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--prompts", type=int, default=8, help="edit prompts")
    ap.add_argument("--new-tokens", type=int, default=96)
    ap.add_argument("--filler-share", type=float, default=streams.FILLER_SHARE,
                    help="a filler's length, a share of a request (the check's: streams.FILLER_SHARE)")
    a = ap.parse_args(argv)
    if a.batch_size < 2 or a.prompts < 1 or a.new_tokens < 8 or a.temperature < 0 or not 0 < a.filler_share <= 1:
        ap.error("--batch-size >= 2, --prompts >= 1, --new-tokens >= 8, --temperature >= 0, 0 < --filler-share <= 1")
    if "=" in a.config:
        spec = from_flags(*a.config.split("=", 1))
    elif m := re.fullmatch(r"ngram-simple g(\d+)", a.config):
        spec = ngram("ngram-simple", int(m.group(1)))
    else:
        ap.error("--config: LABEL=FLAGS or 'ngram-simple gN'")
    costs = json.loads(a.costs.read_text())
    requests = [Request(p.name, p.category, p.text, p.turn) for p in workload_prompts("edit", a.prompts)]
    configs = [Config("none", None, LOG_FLAGS), replace(spec, flags=spec.flags + LOG_FLAGS)]
    B, binary, logs, starts, records = a.batch_size, find_binary(), [], [], []
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="specdec-steplog-") as folder:
        servers = [stack.enter_context(LlamaServer(slots_server(c, a.model, 1, B, Path(folder) / str(i)), binary,
                                                   log_path=Path(folder) / f"server-{i}.log"))
                   for i, c in enumerate(configs)]
        for i, (config, server) in enumerate(zip(configs, servers)):
            client = Client(server.url)
            client.complete("Hello", 4)
            save_prompts(client, requests, a.temperature)
            starts.append(stamped(server.log_path)[-1][0])
            records += stream_round(client, server, config, B, 0, requests, a.temperature, a.new_tokens, 0,
                                    filler_share=a.filler_share)
            logs.append(stamped(server.log_path))
    context = float(np.mean([r.prompt_tokens + r.tokens / 2 for r in records]))  # as `batches.points` reads it
    seconds = batches.batch_seconds(costs, context)
    parsed = [steps(lines, B, start) for lines, start in zip(logs, starts)]
    spec_steps = [rows for rows, _ in parsed]
    if not all(spec_steps):
        raise SystemExit("no decode step found in a server's log: nothing to price")
    K = max(max(f) for _, f in spec_steps[1])  # the longest feed: 1 + the longest draft
    if K < 2:
        raise SystemExit(f"{spec.label} drafted nothing in the round: nothing to price by its mixed steps")
    u_spec, _ = batches.speculating_ubatches(ubatch_seconds(seconds, B, K), B, K - 1,
                                             batches.mixed_seconds(costs, context))
    print(f"{a.model.name}, B = {B}, T = {a.temperature:g}, one streams round of {a.prompts} edit prompts x "
          f"{a.new_tokens} tokens, fillers {a.filler_share:g} of a request; steps priced from {a.costs.name} at "
          f"{context:.0f} tokens of context")
    for config, (rows, dropped), u in zip(configs, parsed, (ubatch_seconds(seconds, B, K), u_spec)):
        print("\n".join(report(config.label, rows, u)) + (f"\n  ({dropped} decodes without an end in the log, left out)"
                                                          if dropped else ""))
    print(f"{spec.label}: share of a slot's steps that drafted, by its position in the request:")
    by_position, by_kind = drafting_shares(logs[1], starts[1], a.new_tokens)
    for first, (n, d) in by_position.items():
        print(f"  tokens {first:3d}-{first + WIDTH - 1:3d} generated: {n:5d} slot steps, {100 * d / n:5.1f} % drafting")
    for kind, (n, d) in by_kind.items():
        print(f"  requests of {kind}: {n:5d} slot steps, {100 * d / n:5.1f} % drafting")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
