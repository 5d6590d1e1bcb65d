"""The B-client check's ngram-simple rows — the target's own acceptance or synthetic — predicted from
each request's own step sequence at B = 1, replayed side by side: no independence between slots
assumed, only the engine's micro-batches.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_replay_batches.py \
        --batches benchmarks/data/llamacpp/batches/batches-f32.json \
        --costs benchmarks/data/llamacpp/batches/costs-b1248-f32.json --model F32_GGUF \
        [--config "synthetic p0.9 g4"] [--json out.json]

`specdec llamacpp validate --batch-sizes` (engines/llamacpp/batches.py) predicts B slots from the
(proposed, accepted) law at B = 1, each slot drawing its steps independently. Its slots start
together on prompts of one kind, so they may draft in phase. This replays what each request did:
the configuration's server answers every prompt of the check alone (the chat template applied,
T = 0, every token decoded, the check's seed for that request and repeat), specdec's
`llamacpp:ngram-simple` drafter (exactly the server's drafts, tests/test_llamacpp_ngram.py)
replays the answer into its step sequence (K_t, N_t) — N_t the drafts that equal the answer, or,
with synthetic acceptance, the server's own draws from the request's seed
(`specdec.engines.llamacpp.synthetic`, draw for draw: same test file) — and the check's waves
(`batches.waves`) are rebuilt from those sequences, all starting together, each
step's feeds K + 1 (0 once a slot has finished) priced by llama.cpp's equal split (`specdec.simulator.equal_split.split_decodes`, u(r, m) from the
cost file) plus c_acc per accepted token; a slot's decode time is the sum of the steps until its
own last. Throughput as the check measures it, B sum(n - 1) / sum(decode), against B / t(B, 1).
The replay's counts are compared with the server's counters for the same request, and with the
check's own B = 1 rows. A synthetic row needs a check that sent each request the same seed at
every B (the file's "seed"; before 2026-11-27 a request's seed depended on its wave and slot).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from specdec.engines.llamacpp.batches import batch_seconds, request_seed, waves
from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.server import LlamaServer, find_binary
from specdec.engines.llamacpp.synthetic import SyntheticAcceptance, eog_ids, synthetic_rates
from specdec.engines.llamacpp.validation import counters, from_flags
from specdec.reference.data.workloads import workload_prompts
from specdec.reference.drafters.llamacpp_ngram import NgramSimpleDrafter, server_steps
from specdec.simulator.equal_split import split_decodes, ubatch_seconds


def wave_seconds(sequences: list[list[tuple[int, int]]], u: np.ndarray, accept_s: float) -> list[float]:
    """Each slot's decode seconds when the slots step together from the same moment."""
    B, longest = len(sequences), max(len(s) for s in sequences)
    done = [0.0] * B
    clock = 0.0
    for t in range(longest):
        feeds = [s[t][0] + 1 if t < len(s) else 0 for s in sequences]
        clock += sum(u[r - 1, m - 1] for r, m in split_decodes(feeds))
        clock += accept_s * sum(s[t][1] for s in sequences if t < len(s))
        for i, s in enumerate(sequences):
            if t == len(s) - 1:
                done[i] = clock
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=Path, required=True, help="a `llamacpp validate --batch-sizes` result")
    ap.add_argument("--costs", type=Path, required=True, help="its cost file")
    ap.add_argument("--model", type=Path, required=True, help="the GGUF it ran")
    ap.add_argument("--config", default="ngram-simple g4",
                    help="the grid row to replay (an ngram-simple one, synthetic acceptance or not)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    check = json.loads(a.batches.read_text())
    cost_data = json.loads(a.costs.read_text())
    flags = next(g["flags"] for g in check["grid"] if g["label"] == a.config)
    config = from_flags(a.config, flags)
    size_n, gamma = int(config.flag("--spec-ngram-simple-size-n")), int(config.flag("--spec-ngram-simple-size-m"))
    rates = synthetic_rates(config, gamma)
    if rates is not None and "seed" not in check:
        raise SystemExit(f"{a.batches}: no per-request seed recorded; its synthetic draws cannot be replayed")
    at = check["temperatures"][0]
    records = at["records"]
    names, new_tokens, repeats = check["prompts"], check["new_tokens"], check["repeats"]
    by_name = {p.name: p for p in workload_prompts(names[0].split("/")[0], len(names))}
    sequences, rows = {}, []
    with LlamaServer(config.server(a.model, check["threads"], 4096), find_binary()) as server:
        client = Client(server.url)
        client.complete("Hello", 4)
        eog = eog_ids(client)
        prompts = {name: client.chat_ids(by_name[name].text) for name in names}
        for r in range(repeats if rates is not None else 1):  # at T = 0 only synthetic draws change with the seed
            for j, name in enumerate(names):
                ids = prompts[name]
                seed = request_seed(check.get("seed", 0), r, j)
                before = counters(client)[0]
                done = client.complete(ids, new_tokens, temperature=0.0, seed=seed, return_tokens=True,
                                       ignore_eos=True)
                served = (counters(client)[0] - before).astype(int).tolist()
                accepted = None if rates is None else SyntheticAcceptance(rates, seed, eog).accepted
                seq = server_steps(NgramSimpleDrafter(size_n), ids, [int(t) for t in done.response["tokens"]], gamma,
                                   accepted)
                for rr in range(repeats) if rates is None else [r]:
                    sequences[rr, name] = seq
                replayed = [sum(k > 0 for k, _ in seq), sum(k for k, _ in seq), sum(n for _, n in seq)]
                alone = [(x["drafts"], x["draft_tokens"], x["accepted"]) for x in records
                         if x["config"] == a.config and x["batch"] == 1 and x["prompt"] == name
                         and (rates is None or x["repeat"] == r)]
                rows.append({"prompt": name, "repeat": r, "seed": seed, "server": served, "replayed": replayed,
                             "check_b1": [list(x) for x in alone]})
                print(f"{name} r{r}: server {served}, replayed {replayed}, the check at B = 1 {sorted(set(alone))}",
                      file=sys.stderr)
    context = float(np.mean([r["prompt_tokens"] + r["tokens"] / 2 for r in records]))
    seconds = batch_seconds(cost_data, context)
    accept_s = max(0.0, float(cost_data.get("accept_seconds") or 0.0))
    points = {p["batch"]: p for c in at["configs"] if c["config"] == a.config for p in c["points"]}
    out = []
    print(f"{a.config}: measured, replayed side by side (error), independent slots, one packed pass")
    for B in check["batch_sizes"]:
        u = ubatch_seconds(seconds, B, gamma + 1)
        tokens = decode = 0.0
        for r in range(repeats):
            for wave in waves(len(names), B, r):
                picks = [sequences[r, names[j]] for j in wave]
                times = wave_seconds(picks, u, accept_s)
                tokens += sum(len(seq) + sum(acc for _, acc in seq) for seq in picks)  # n - 1 each
                decode += sum(times)
        predicted = (B * tokens / decode) / (B / u[B - 1, 0])
        p = points[B]
        print(f"  B={B:<3}{p['measured']:>7.3f}x  {predicted:.3f}x ({100 * (predicted / p['measured'] - 1):+.1f}%)"
              f"  {p['predicted']:.3f}x  {p['predicted_one_pass']:.3f}x")
        out.append({"batch": B, "measured": p["measured"], "replayed": predicted,
                    "error": predicted / p["measured"] - 1, "independent": p["predicted"],
                    "one_pass": p["predicted_one_pass"]})
    if a.json is not None:
        a.json.write_text(json.dumps({"batches": str(a.batches), "costs": str(a.costs), "config": a.config,
                                      "requests": rows, "points": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
