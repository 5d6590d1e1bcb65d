"""The B-client check's ngram-simple rows — the target's own acceptance or synthetic — predicted from
each request's own step sequence at B = 1, replayed side by side: no independence between slots
assumed, only the engine's micro-batches.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_replay_batches.py \
        --batches benchmarks/data/llamacpp/batches/batches-f32.json \
        --costs benchmarks/data/llamacpp/batches/costs-b1248-f32.json --model F32_GGUF \
        [--config "synthetic p0.9 g4"] [--gaps 0,1,measured] [--json out.json]

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
step's feeds K + 1 (0 once a slot has finished) priced by llama.cpp's equal split
(`specdec.simulator.equal_split.split_decodes`, u(r, m) from the cost file, from its mixed steps
where it timed them at the row's draft length: `mixed_ubatches`) plus c_acc per accepted token; a
slot's decode time is the sum of the steps until its own last (an idle slot breaks a run, and the
mixed steps' second micro-batch then prices a first one). Throughput as the check measures it,
B sum(n - 1) / sum(decode), against B / t(B, 1).
The replay's counts are compared with the server's counters for the same request, and with the
check's own B = 1 rows. A synthetic row needs a check that sent each request the same seed at
every B (the file's "seed"; before 2026-11-27 a request's seed depended on its wave and slot).

A check run with `--arrivals streams` (engines/llamacpp/streams.py) is replayed as its streams ran:
stream i's lead-in (the first i/B of a request), its warm-up (the check's `warm_up` whole requests at B > 1),
its requests, and fillers (the check's `filler_share` of a
request) until every stream has run its own; each request one untimed prompt step (one token restored into the slot) and
then its steps, a lead-in or filler the steps of its prefix; between two requests a stream sits out
`--gaps` steps (`measured`: each row's own mean `idle_ms` before a request, in its steps at that B),
and no speculation's streams are replayed the same way as the speedup's denominator.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from specdec.engines.llamacpp.batches import (batch_seconds, mixed_seconds, request_seed, speculating_ubatches,
                                              waves)
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


def streams_seconds(B: int, n: int, repeat: int, new_tokens: int, steps_of, u: np.ndarray, accept_s: float,
                    gap: float, filler_share: float | None = None, warm_up: int | None = None,
                    untimed: str | None = None) -> tuple[float, float]:
    """(sum of the timed requests' decode seconds, their tokens n - 1) of one streams round
    (engines/llamacpp/streams.py): stream i decodes its lead-in, at B > 1 `warm_up` whole requests (the
    check's; None: `streams.WARM_UP`), its requests k = i, i + B, ... and
    fillers until every stream has decoded its own; each request a prompt step (one token, feed 1, untimed)
    and then its steps, `steps_of(j, tokens)`; a stream sits out `gap` steps between two requests (a
    fractional gap spread over the requests: the m-th sits out floor(m gap) - floor((m - 1) gap)); a
    filler is `filler_share` of a request (the check's; None: `streams.FILLER_SHARE`)."""
    from specdec.engines.llamacpp.streams import FILLER_SHARE, UNTIMED, WARM_UP, lead_in, stream_requests, \
        untimed_prompts

    share = FILLER_SHARE if filler_share is None else filler_share
    warm = (WARM_UP if warm_up is None else warm_up) if B > 1 else 0
    untimed_request = untimed_prompts(untimed or UNTIMED)

    def requests(i: int):
        mine = stream_requests(n, B, i)
        if lead_in(B, i, new_tokens):
            yield mine[0], lead_in(B, i, new_tokens), False
        for w in range(warm):
            yield untimed_request(mine, w), new_tokens, False
        for k in mine:
            yield k, new_tokens, True
        f = 0
        while True:
            yield untimed_request(mine, f), max(1, round(share * new_tokens)), False
            f += 1

    queues = [requests(i) for i in range(B)]
    left = [len(stream_requests(n, B, i)) for i in range(B)]
    state = [None] * B  # (steps with feeds, position, timed, start clock, tokens)
    wait, served = [0] * B, [0] * B
    clock = decode = tokens = 0.0
    while any(left):
        for i in range(B):
            if state[i] is None and wait[i] == 0:
                k, count, timed = next(queues[i])
                seq = [(0, 0)] + list(steps_of((k + repeat) % n, count))  # the prompt's step first
                state[i] = [seq, 0, timed, None, count - 1]
        feeds = [0 if s is None else s[0][s[1]][0] + 1 for s in state]
        seconds = sum(u[r - 1, m - 1] for r, m in split_decodes(feeds))
        seconds += accept_s * sum(s[0][s[1]][1] for s in state if s is not None)
        for i, s in enumerate(state):
            if s is None:
                wait[i] -= 1
                continue
            if s[1] == 1:
                s[3] = clock  # the request's decode starts after its prompt step
            s[1] += 1
            if s[1] == len(s[0]):
                if s[2]:
                    decode += clock + seconds - (s[3] if s[3] is not None else clock)
                    tokens += s[4]
                    left[i] -= 1
                served[i] += 1
                state[i], wait[i] = None, int(np.floor(served[i] * gap) - np.floor((served[i] - 1) * gap))
        clock += seconds
    return decode, tokens


def idle_steps(records: list[dict], config: str, B: int) -> float:
    """A configuration's mean idle time before a request at B (the check's `idle_ms`), in its mean step."""
    rows = [r for r in records if r["config"] == config and r["batch"] == B]
    steps = sum(r["tokens"] - 1 - r["accepted"] for r in rows)
    return float(np.mean([r["idle_ms"] for r in rows]) / (sum(r["decode_ms"] for r in rows) / steps))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=Path, required=True, help="a `llamacpp validate --batch-sizes` result")
    ap.add_argument("--costs", type=Path, required=True, help="its cost file")
    ap.add_argument("--model", type=Path, required=True, help="the GGUF it ran")
    ap.add_argument("--config", default="ngram-simple g4",
                    help="the grid row to replay (an ngram-simple one, synthetic acceptance or not)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--gaps", default="1", help="streams: the steps a stream sits out between two requests (its "
                    "restore and round trip), one replay per value given (comma-separated)")
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
    sequences, rows, answers, cache = {}, [], {}, {}
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
                emitted = [int(t) for t in done.response["tokens"]]
                seq = server_steps(NgramSimpleDrafter(size_n), ids, emitted, gamma, accepted)
                for rr in range(repeats) if rates is None else [r]:
                    sequences[rr, name] = cache[rr, j, new_tokens] = seq
                    answers[rr, j] = ids, emitted, seed
                replayed = [sum(k > 0 for k, _ in seq), sum(k for k, _ in seq), sum(n for _, n in seq)]
                alone = [(x["drafts"], x["draft_tokens"], x["accepted"]) for x in records
                         if x["config"] == a.config and x["batch"] == 1 and x["prompt"] == name
                         and (rates is None or x["repeat"] == r)]
                rows.append({"prompt": name, "repeat": r, "seed": seed, "server": served, "replayed": replayed,
                             "check_b1": [list(x) for x in alone]})
                print(f"{name} r{r}: server {served}, replayed {replayed}, the check at B = 1 {sorted(set(alone))}",
                      file=sys.stderr)
    def steps_of(r: int, j: int, count: int) -> list[tuple[int, int]]:
        """Request j's steps when it decodes its first `count` tokens (a lead-in or a filler: a prefix)."""
        if (r, j, count) not in cache:
            ids, emitted, seed = answers[r, j]
            accepted = None if rates is None else SyntheticAcceptance(rates, seed, eog).accepted
            cache[r, j, count] = server_steps(NgramSimpleDrafter(size_n), ids, emitted[:count], gamma, accepted)
        return cache[r, j, count]

    context = float(np.mean([r["prompt_tokens"] + r["tokens"] / 2 for r in records]))
    seconds = batch_seconds(cost_data, context)
    mixed = mixed_seconds(cost_data, context)
    accept_s = max(0.0, float(cost_data.get("accept_seconds") or 0.0))
    points = {p["batch"]: p for c in at["configs"] if c["config"] == a.config for p in c["points"]}
    out = []
    print(f"{a.config}: measured, replayed side by side (error), independent slots, one packed pass")
    for B in check["batch_sizes"]:
        u = ubatch_seconds(seconds, B, gamma + 1)  # the plain server's; the speculating one's from its mixed steps
        u_spec, _ = speculating_ubatches(u, B, gamma, mixed)
        tokens = decode = 0.0
        by_gap = {}
        if check.get("arrivals") == "streams":  # against no speculation's own streams, gaps and all
            share = check.get("filler_share") or 0.5  # checks before 0ddd1ab did not record it: 0.5
            warm = check.get("warm_up") or 0  # checks before the warm-up (165c405) had none
            untimed = check.get("untimed") or "own"  # and took the untimed requests from each stream's own
            for gap in a.gaps.split(","):
                # "measured": each configuration's own mean idle time before a request, in its steps at this B
                g = {c: idle_steps(records, c, B) for c in ("none", a.config)} if gap == "measured" \
                    else dict.fromkeys(("none", a.config), float(gap))
                plain = [streams_seconds(B, len(names), r, new_tokens, lambda j, count: [(0, 0)] * (count - 1), u,
                                         0.0, g["none"], share, warm, untimed) for r in range(repeats)]
                spec = [streams_seconds(B, len(names), r, new_tokens, lambda j, count: steps_of(r, j, count), u_spec,
                                        accept_s, g[a.config], share, warm, untimed) for r in range(repeats)]
                by_gap[gap] = (sum(t for _, t in spec) / sum(d for d, _ in spec)) \
                    / (sum(t for _, t in plain) / sum(d for d, _ in plain))
            predicted = next(iter(by_gap.values()))
        else:
            for r in range(repeats):
                for wave in waves(len(names), B, r):
                    picks = [sequences[r, names[j]] for j in wave]
                    times = wave_seconds(picks, u_spec, accept_s)
                    tokens += sum(len(seq) + sum(acc for _, acc in seq) for seq in picks)  # n - 1 each
                    decode += sum(times)
            predicted = (B * tokens / decode) / (B / u[B - 1, 0])
        p = points[B]
        print(f"  B={B:<3}{p['measured']:>7.3f}x  {predicted:.3f}x ({100 * (predicted / p['measured'] - 1):+.1f}%)"
              f"  {p['predicted']:.3f}x  {p['predicted_one_pass']:.3f}x"
              + "".join(f"; gap {g}: {x:.3f}x ({100 * (x / p['measured'] - 1):+.1f}%)" for g, x in by_gap.items()))
        out.append({"batch": B, "measured": p["measured"], "replayed": predicted,
                    "error": predicted / p["measured"] - 1, "independent": p["predicted"],
                    "one_pass": p["predicted_one_pass"], "by_gap": by_gap})
    if a.json is not None:
        a.json.write_text(json.dumps({"batches": str(a.batches), "costs": str(a.costs), "config": a.config,
                                      "requests": rows, "points": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
