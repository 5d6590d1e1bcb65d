"""Do drafting slots that are not next to each other cost what the equal split says? llama.cpp cuts
a step of B slots into micro-batches of consecutive slots (`specdec.simulator.equal_split`), so one
slot verifying k tokens beside plain ones costs a second decode, and two drafting slots with a plain
one between them a second and a third. The cost file times only the first r slots drafting
(`specdec llamacpp costs --mixed-k`); this times chosen sets of drafting slots on one `-np B`
server (every draft rejected: `costs.synth_config`; the plain slots on numbers that never repeat:
`costs.noise_sampling`), interleaved, medians of the repeats, and prices each other set as the equal
split does (`split_decodes`): the plain step t({}) plus, per run of r consecutive drafting slots, the
second micro-batch u(r, k - 1) = t({0..r-1}) - t({}) ({}, {0} and {0,1} always timed; longer runs
priced only where `--sets` names their prefix set).

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_split_runs.py \\
        [--model GGUF] [--batch-size 8] [--k 5] [--sets "0;7;0,1;0,2;0,1,3,4;0,1,2,3;0,2,4,6"] [--repeats 3]

The AVX-512 EPYC at f32, B = 8, k = 5 (2026-11-29): benchmarks/data/llamacpp/batches/split-runs-f32-epyc.txt.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.costs import cost_prompt, noise_prompt, noise_sampling, synth_config, timed_batch
from specdec.engines.llamacpp.server import LlamaServer, build_info, default_model, find_binary
from specdec.simulator.equal_split import split_decodes

SLOT_CONTEXT = 453  # -c per slot, as `specdec llamacpp costs --contexts 160,320 --new-tokens 64 --k ..5` sizes it


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: the default target's Q4_1)")
    ap.add_argument("--batch-size", type=int, default=8, help="-np B, every slot decoding")
    ap.add_argument("--k", type=int, default=5, help="tokens a drafting slot verifies (>= 2)")
    ap.add_argument("--sets", default="0;7;0,1;0,2;0,1,3,4;0,1,2,3;0,2,4,6", help="drafting slots, sets split by ';'")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    a = ap.parse_args(argv)
    try:
        sets = list(dict.fromkeys(tuple(sorted({int(x) for x in s.split(",")})) for s in a.sets.split(";")))
    except ValueError:
        ap.error(f"--sets: slot numbers split by ',' and sets by ';', got {a.sets!r}")
    if a.k < 2 or a.batch_size < 2 or a.repeats < 1 or any(min(s) < 0 or max(s) >= a.batch_size for s in sets):
        ap.error("--k >= 2, --batch-size >= 2, --repeats >= 1, and every slot of --sets below --batch-size")
    sets = [(), (0,), (0, 1)] + [s for s in sets if s not in ((), (0,), (0, 1))]
    model, binary = a.model or default_model(), find_binary()
    prompt, plain = cost_prompt(160, a.k), noise_sampling(SLOT_CONTEXT)
    samples: dict[tuple, list[float]] = {s: [] for s in sets}
    with ExitStack() as stack:
        server = stack.enter_context(LlamaServer(synth_config(model, a.k, 0.0, a.batch_size,
                                                              a.batch_size * SLOT_CONTEXT, 1), binary))
        client = Client(server.url)
        client.complete("Hello", 4)  # warm-up, untimed
        noise = noise_prompt(timed_batch(client, [prompt], 8).prompt_tokens)
        for r in range(a.repeats):
            for s in sets[r % len(sets):] + sets[:r % len(sets)]:
                drafting = set(s)
                sample = timed_batch(client, [prompt if i in drafting else noise for i in range(a.batch_size)],
                                     a.new_tokens, [{} if i in drafting else plain for i in range(a.batch_size)],
                                     ignore_eos=True)
                samples[s].append(sample.ms / sample.steps)
            print(f"repeat {r + 1}/{a.repeats} done", file=sys.stderr)
    step = {s: statistics.median(v) for s, v in samples.items()}
    # the second micro-batch of r rows, from the first r slots drafting (what the cost file times)
    u = {len(s): step[s] - step[()] for s in sets if s and s == tuple(range(len(s)))}
    print(f"llama-server {build_info(binary).get('llama_cpp_commit', '?')[:7]}, {model.name}, -t 1, -np "
          f"{a.batch_size}, drafting slots verify {a.k} tokens (every draft rejected); ms a step, medians of "
          f"{a.repeats} (the plain slots' sampling included); the second micro-batch u(r, {a.k - 1}) from the "
          "first r slots drafting: " + ", ".join(f"r = {r} {x:.1f}" for r, x in sorted(u.items())))
    for s in sets:
        later = split_decodes([a.k if i in s else 1 for i in range(a.batch_size)])[1:]  # after B x 1 token
        line = f"drafting {{{','.join(map(str, s))}}}: {len(later) + 1} decodes, measured {step[s]:6.1f}"
        if s and s != tuple(range(len(s))) and all(rows in u for rows, _ in later):
            priced = step[()] + sum(u[rows] for rows, _ in later)
            line += f"  priced {priced:6.1f}  ({100 * (priced / step[s] - 1):+.1f} %)"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
