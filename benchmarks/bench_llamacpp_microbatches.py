"""How llama-server decodes slots that feed unequal token counts, timed against the equal-split rule
(`specdec.simulator.equal_split`) and against one packed pass, in one run.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_llamacpp_microbatches.py \
        [--model GGUF] [--k 5] [--repeats 3] [--new-tokens 64] [--json out.json]

Every server speculates with ngram-simple and rejects every draft (`--spec-synth-rates 0,...`,
as `specdec llamacpp costs` times t(B, k)), so a slot whose context repeats ("rep": the cost
prompt) verifies k tokens at every step and a slot on random numbers ("noise", no repeated
n-gram) feeds its one token; both emit one token a step, so they step together and a request's
decode time over its tokens is the step's. Timed, slots in order (k = 5):

    t(1, 1), t(2, 1), t(3, 1)   plain steps, 1, 2 and 3 slots
    t(1, 4), t(2, 4)       one and two slots verifying k - 1 (a later micro-batch's shape)
    t(2, 3)                two slots of 3 tokens: 6 tokens, one packed pass over (5, 1)
    t(3, 5)                three slots verifying k
    (5, 1), (1, 5)         a verifying slot beside a plain one
    (5, 1, 5), (1, 5, 5)   the same three feeds in two orders

The rule predicts (5, 1) and (1, 5) as t(2, 1) + t(1, 4) (two decodes), (5, 1, 5) as
t(3, 1) + 2 t(1, 4) (the plain slot breaks the run: three decodes) and (1, 5, 5) as
t(3, 1) + t(2, 4) (two); one packed pass prices (5, 1) at t(2, 3) and both triples at
t(3, 1 + 2 (k - 1) / 3) (read linearly between t(3, 1) and t(3, k)). Medians over the repeats,
configurations interleaved. A timed t(B, k > 1) is corrected for the steps that drafted nothing
as the cost file corrects it (`costs.step_seconds`, with t(B, 1) as the plain step): before
2026-11-29 it was the raw mean over all steps, low wherever the cost prompt drafted at fewer than
every step (on the EPYC at f32, t(1, 4) 33.4 ms raw where the cost file times 38.8).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.costs import Sample, cost_prompt, step_seconds, synth_config, timed_batch
from specdec.engines.llamacpp.server import LlamaServer, build_info, default_model, find_binary


def step_ms(client: Client, prompts: list[str], new_tokens: int) -> tuple[float, float, Sample]:
    """Slots 0..n-1 on `prompts` at once, every token decoded: the step in ms, the share of the
    slots' steps that drafted (the server's counters) and the sample."""
    s = timed_batch(client, prompts, new_tokens, ignore_eos=True)
    return s.ms / s.steps, s.drafts / s.steps, s


def timed_k(name: str) -> tuple[int, int]:
    """(B, k) of a timed entry's name "t(B, k)"."""
    b, k = name[2:-1].split(", ")
    return int(b), int(k)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: the default target's Q4_1)")
    ap.add_argument("--k", type=int, default=5, help="tokens a verifying slot feeds (>= 3, odd)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.k < 3 or a.k % 2 == 0 or a.repeats < 1 or a.new_tokens < 8:
        ap.error("--k must be odd and >= 3, --repeats >= 1, --new-tokens >= 8")
    model = a.model or default_model()
    binary = find_binary()
    k, half = a.k, (a.k + 1) // 2
    rep = cost_prompt(256)
    rng = random.Random(7)
    noise = " ".join(str(rng.randrange(0, 1000)) for _ in range(100))
    ctx = 3 * (800 + a.new_tokens + k + 64)
    plan = {  # name: (server's k, prompts in slot order)
        "t(1, 1)": (1, [rep]), "t(2, 1)": (1, [rep, rep]), "t(3, 1)": (1, [rep, rep, rep]),
        f"t(1, {k - 1})": (k - 1, [rep]), f"t(2, {k - 1})": (k - 1, [rep, rep]), f"t(2, {half})": (half, [rep, rep]),
        f"t(3, {k})": (k, [rep, rep, rep]),
        f"({k}, 1)": (k, [rep, noise]), f"(1, {k})": (k, [noise, rep]),
        f"({k}, 1, {k})": (k, [rep, noise, rep]), f"(1, {k}, {k})": (k, [noise, rep, rep]),
    }
    times: dict[str, list[float]] = {name: [] for name in plan}
    shares: dict[str, list[float]] = {name: [] for name in plan}
    samples: dict[str, list[Sample]] = {name: [] for name in plan}
    with ExitStack() as stack:
        clients = {kk: Client(stack.enter_context(LlamaServer(synth_config(model, kk, 0.0, 3, ctx, a.threads),
                                                              binary)).url) for kk in {kk for kk, _ in plan.values()}}
        for c in clients.values():
            c.complete("Hello", 4)  # warm-up, untimed
        names = list(plan)
        for r in range(a.repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                kk, prompts = plan[name]
                ms, share, sample = step_ms(clients[kk], prompts, a.new_tokens)
                times[name].append(ms)
                shares[name].append(share)
                samples[name].append(sample)
            print(f"repeat {r + 1}/{a.repeats} done", file=sys.stderr)
    t = {name: statistics.median(v) for name, v in times.items()}
    raw = dict(t)
    for name in names:  # a verify's time, its plain steps taken out (the plain t(B, 1) of the same repeat)
        if name.startswith("t(") and timed_k(name)[1] > 1:
            plain = times[f"t({timed_k(name)[0]}, 1)"]
            t[name] = 1000 * statistics.median(step_seconds(s, timed_k(name)[1], p / 1000)[0]
                                               for s, p in zip(samples[name], plain))
    t21, t31, t1m, t2m = t["t(2, 1)"], t["t(3, 1)"], t[f"t(1, {k - 1})"], t[f"t(2, {k - 1})"]
    t3k = t[f"t(3, {k})"]
    one_pass_triple = t31 + (t3k - t31) * 2 / 3  # t(3, 1 + 2 (k - 1) / 3), linear in k between t(3, 1) and t(3, k)
    rows = [(f"({k}, 1)", t21 + t1m, t[f"t(2, {half})"]), (f"(1, {k})", t21 + t1m, t[f"t(2, {half})"]),
            (f"({k}, 1, {k})", t31 + 2 * t1m, one_pass_triple), (f"(1, {k}, {k})", t31 + t2m, one_pass_triple)]
    print(f"llama-server {build_info(binary).get('llama_cpp_commit', '?')[:7]}, {model.name}, -t {a.threads}; medians of "
          f"{a.repeats} repeats, ms a step")
    print("timed (drafting steps only): " + "  ".join(f"{n} {t[n]:.1f}" for n in names if n.startswith("t(")))
    print("raw means, share drafted: " + "  ".join(f"{n} {raw[n]:.1f} {statistics.mean(shares[n]):.2f}"
                                                  for n in names if n.startswith("t(") and timed_k(n)[1] > 1))
    print(f"{'feeds':<14}{'measured':>10}{'equal split':>13}{'error':>8}{'one pass':>10}{'error':>8}{'drafts/step':>13}")
    out = []
    for name, split, packed in rows:
        m = t[name]
        print(f"{name:<14}{m:>10.1f}{split:>13.1f}{100 * (split / m - 1):>+7.1f}%{packed:>10.1f}"
              f"{100 * (packed / m - 1):>+7.1f}%{statistics.mean(shares[name]):>13.2f}")
        out.append({"feeds": name, "measured_ms": m, "equal_split_ms": split, "one_pass_ms": packed,
                    "all_ms": times[name], "drafts_per_step": statistics.mean(shares[name])})
    if a.json is not None:
        a.json.write_text(json.dumps({"engine": build_info(binary), "model": str(model), "k": k,
                                      "repeats": a.repeats, "new_tokens": a.new_tokens, "threads": a.threads,
                                      "timed_ms": t, "raw_ms": raw,
                                      "shares": {n: shares[n] for n in names}, "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
