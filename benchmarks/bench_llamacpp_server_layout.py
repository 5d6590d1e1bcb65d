"""Does one slot's k-token verify cost the same on every llama-server? The same request (the cost
prompt, every draft rejected: `costs.synth_config`) timed on servers that differ only in `-np`
(the slots it could serve; one is used), `-ub`, `-c` or nothing at all (several processes of one
configuration), in one interleaved run, medians of the repeats, ms a step of the drafting steps
(`costs.step_seconds`, the plain step of the same server configuration taken out).

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_server_layout.py \\
        [--model GGUF] [--k 5] [--nps 1,2,4] [--ubs 512,8] [--slot-contexts 453,2048] [--instances 2] [--repeats 3]

On the AVX-512 EPYC at f32 (2026-11-29) one slot's 5-token verify took 43.8 ms at -np 1 and 34.6 at
-np 2, 43.4 at -np 2 -ub 8, every process of one configuration within 3 %: a cost file must be timed
on servers configured as the ones it prices (docs/engines.md, "What a micro-batch costs depends on
the server"; `specdec llamacpp costs --mixed-k`).
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.costs import cost_prompt, step_seconds, synth_config, timed_batch
from specdec.engines.llamacpp.server import LlamaServer, build_info, default_model, find_binary

CTX_PER_SLOT = 453  # what `specdec llamacpp costs --contexts 160,320 --new-tokens 64 --k ..5` gives each slot


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: the default target's Q4_1)")
    ap.add_argument("--k", type=int, default=5, help="tokens the slot verifies (>= 2)")
    ap.add_argument("--nps", default="1,2,4", help="-np values")
    ap.add_argument("--ubs", default="512,8", help="-ub values (512: llama.cpp's default)")
    ap.add_argument("--slot-contexts", default=str(CTX_PER_SLOT),
                    help="-c per slot (-c = -np x this; 2048: the batch check's, batches.SLOT_CTX)")
    ap.add_argument("--instances", type=int, default=2, help="processes of each configuration")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args(argv)
    nps, ubs = [int(x) for x in a.nps.split(",")], [int(x) for x in a.ubs.split(",")]
    ctxs = [int(x) for x in a.slot_contexts.split(",")]
    if a.k < 2 or min(nps) < 1 or min(ubs) < a.k or min(ctxs) < CTX_PER_SLOT or a.instances < 1 or a.repeats < 1:
        ap.error(f"--k >= 2, -np >= 1, -ub >= k, --slot-contexts >= {CTX_PER_SLOT}, --instances and --repeats >= 1")
    model, binary = a.model or default_model(), find_binary()
    prompt = cost_prompt(160, a.k)
    configs = {}
    layouts = [(np_, ub, ctx) for np_ in nps for ub in ubs for ctx in ctxs]
    for np_, ub, ctx in layouts:
        for k in (1, a.k):
            base = synth_config(model, k, 0.0, np_, np_ * ctx, 1)
            extra = base.extra + (("-ub", str(ub), "-b", str(max(ub, 64))) if ub != 512 else ())
            for i in range(a.instances):
                configs[np_, ub, ctx, k, i] = dataclasses.replace(base, extra=extra)
    samples: dict[tuple, list] = {key: [] for key in configs}
    with ExitStack() as stack:
        clients = {key: Client(stack.enter_context(LlamaServer(c, binary)).url) for key, c in configs.items()}
        for c in clients.values():
            c.complete("Hello", 4)
        keys = list(clients)
        for r in range(a.repeats):
            for key in keys[r * 5 % len(keys):] + keys[:r * 5 % len(keys)]:
                samples[key].append(timed_batch(clients[key], [prompt], a.new_tokens, ignore_eos=True))
            print(f"repeat {r + 1}/{a.repeats} done", file=sys.stderr)
    print(f"llama-server {build_info(binary).get('llama_cpp_commit', '?')[:7]}, {model.name}, -t 1, one slot of "
          f"-np slots; ms a step, medians of {a.repeats}")
    for np_, ub, ctx in layouts:
        for i in range(a.instances):
            plain = statistics.median(s.ms / s.steps for s in samples[np_, ub, ctx, 1, i])
            verify = statistics.median(1000 * step_seconds(s, a.k, plain / 1000)[0]
                                       for s in samples[np_, ub, ctx, a.k, i])
            print(f"-np {np_:<2} -ub {ub:<4} -c {np_ * ctx:<6} process {i}: t(1) {plain:5.1f}  t({a.k}) {verify:5.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
