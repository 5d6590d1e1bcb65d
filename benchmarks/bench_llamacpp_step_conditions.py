"""What else moves llama-server's step cost besides (B, k, context): four paired checks behind the
B-client check out of phase (benchmarks/RESULTS.md, "B clients out of phase"), each on one server or
a few alive at once, the conditions alternating within each repeat, medians of ms per step.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_step_conditions.py \
        [--model GGUF] [--checks accepted,spread,chat,streams] [--repeats 3]

- accepted: a 5-token verify with every draft rejected (`--spec-synth-rates 0,...`, how the cost file
  times t(B, k)) against every draft accepted (rates 1), on the cost prompt, B = 1, 4, 8; ms per step
  is decode time over steps (tokens - 1 - accepted).
- spread: t(B, 1) and t(B, 5) with the B slots at one context against spread over 160-310 tokens
  (the same mean): out of phase, slots sit at different contexts.
- chat: a plain step of a chat turn (`/v1/chat/completions`, the template) against a raw prompt
  (`/completion`) of the cost file's kind at about the same context, B = 1, 8.
- streams: at B = 8, no speculation: the cost file's t(8, 1) (one prompt, in phase), the 8 edit
  prompts restored into the slots and started together (a wave), and a round of the streams check
  (`engines/llamacpp/streams.py`: lead-ins, fillers, restores), alternating on one server.
"""
from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.costs import cost_prompt, step_seconds, synth_config, timed_batch
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, default_model, find_binary
from specdec.engines.llamacpp.streams import save_prompts, saved_name, slots_server, stream_round
from specdec.engines.llamacpp.validation import Config, Request, send
from specdec.reference.data.workloads import workload_prompts

NEW_TOKENS = 48


def report(title: str, res: dict) -> None:
    for key, values in res.items():
        print(f"{title} {key:<22} {np.median(values):8.2f} ms/step  {[round(x, 1) for x in values]}", flush=True)


def accepted(model, binary, repeats: int) -> None:
    for B in (1, 4, 8):
        rows = (("t(1)", 1, 0.0), ("t(5) rejected", 5, 0.0), ("t(5) accepted", 5, 1.0))
        servers = [LlamaServer(synth_config(model, k, rate, B, B * 900, None), binary).start() for _, k, rate in rows]
        try:
            clients = [Client(s.url) for s in servers]
            for c in clients:
                c.complete("Hello", 4)
            res = {name: [] for name, _, _ in rows}
            for _ in range(repeats):
                for (name, _, _), c in zip(rows, clients):
                    s = timed_batch(c, [cost_prompt(230, 16)] * B, NEW_TOKENS)
                    res[name].append(s.ms / (s.steps - s.accepted))
            report(f"accepted B={B}", res)
        finally:
            for s in servers:
                s.stop()


def spread(model, binary, repeats: int) -> None:
    for B in (4, 8):
        servers = {k: LlamaServer(synth_config(model, k, 0.0, B, B * 900, None), binary).start() for k in (1, 5)}
        try:
            clients = {k: Client(s.url) for k, s in servers.items()}
            for c in clients.values():
                c.complete("Hello", 4)
            layouts = {"one": [cost_prompt(235, 16)] * B,
                       "spread": [cost_prompt(int(L), 16) for L in np.linspace(160, 310, B)]}
            res = {}
            for _ in range(repeats):
                for name, prompts in layouts.items():
                    t1 = None
                    for k in (1, 5):
                        t = step_seconds(timed_batch(clients[k], prompts, NEW_TOKENS), k, t1)[0]
                        t1 = t if k == 1 else t1
                        res.setdefault(f"t({k}) {name}", []).append(1e3 * t)
            report(f"spread B={B}", res)
        finally:
            for s in servers.values():
                s.stop()


def chat(model, binary, repeats: int) -> None:
    text = workload_prompts("edit", 1)[0].text
    for B in (1, 8):
        with LlamaServer(ServerConfig(model, parallel=B, ctx_size=B * 800), binary) as server:
            c = Client(server.url)
            c.complete("Hello", 4)

            def one(kind: str, i: int):
                if kind == "chat":
                    turn = [{"role": "user", "content": text}]
                    c.chat(turn, 1, id_slot=i, cache_prompt=True)
                    return c.chat(turn, NEW_TOKENS, id_slot=i, cache_prompt=True, ignore_eos=True)
                c.complete(cost_prompt(250, 8), 1, id_slot=i, cache_prompt=True)
                return c.complete(cost_prompt(250, 8), NEW_TOKENS, id_slot=i, cache_prompt=True, ignore_eos=True)

            res = {"raw": [], "chat": []}
            for _ in range(repeats):
                for kind in res:
                    with ThreadPoolExecutor(B) as pool:
                        done = list(pool.map(lambda i: one(kind, i), range(B)))
                    res[kind].append(sum(d.decode_ms for d in done) / sum(d.tokens - 1 for d in done))
            report(f"chat B={B}", res)


def streams(model, binary, repeats: int) -> None:
    B, new_tokens = 8, 96
    requests = [Request(p.name, p.category, p.text, p.turn) for p in workload_prompts("edit", 8)]
    none = Config("none", None)
    with tempfile.TemporaryDirectory(prefix="specdec-slots-") as folder:
        with LlamaServer(slots_server(none, model, None, B, Path(folder)), binary) as server:
            c = Client(server.url)
            c.complete("Hello", 4)
            save_prompts(c, requests, 0.0)
            res = {"cost file's t(8, 1)": [], "a wave, restored": [], "streams round": []}
            for r in range(repeats):
                s = timed_batch(c, [cost_prompt(208, 5)] * B, new_tokens)
                res["cost file's t(8, 1)"].append(s.ms / s.steps)
                for i in range(B):
                    c.slot_action(i, "restore", saved_name(i))
                with ThreadPoolExecutor(B) as pool:
                    done = list(pool.map(lambda i: send(c, requests[i], new_tokens, 0.0, 1, id_slot=i,
                                                        cache_prompt=True, ignore_eos=True), range(B)))
                res["a wave, restored"].append(sum(d.decode_ms for d in done) / sum(d.tokens - 1 for d in done))
                records = stream_round(c, server, none, B, r, requests, 0.0, new_tokens, 0)
                res["streams round"].append(sum(x.decode_ms for x in records) / sum(x.tokens - 1 for x in records))
            report("streams B=8", res)


CHECKS = {"accepted": accepted, "spread": spread, "chat": chat, "streams": streams}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF (default: the default target's Q4_1)")
    ap.add_argument("--checks", default=",".join(CHECKS))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    checks = a.checks.split(",")
    unknown = [c for c in checks if c not in CHECKS]
    if unknown or a.repeats < 1:
        ap.error(f"--checks: unknown {unknown} (choose from {', '.join(CHECKS)})" if unknown else "--repeats must be >= 1")
    model, binary = a.model or default_model(), find_binary()
    for name in checks:
        CHECKS[name](model, binary, a.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
