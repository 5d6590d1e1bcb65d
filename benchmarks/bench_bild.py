"""Benchmark Big Little Decoder on the default target (SmolLM2-135M-Instruct, CPU) with a
KenLM n-gram little model, against exact speculative decoding with the same n-gram.

Names: alpha_FB / alpha_RB are BiLD's fallback / rollback thresholds, gamma the draft
length of exact speculative decoding (Leviathan et al.).

For held-out Shakespeare/Austen prompts (greedy decoding, EOS respected), runs the greedy
autoregressive baseline, BiLD over a grid of alpha_FB x alpha_RB (alpha_RB = inf is the
no-rollback ablation, "argmax" the exact limit), the no-fallback ablation (hand over every N
tokens) and exact speculative decoding at several gamma, all through the comparison harness
(`specdec.reference.bild.sweep.run_sweep`: interleaved per prompt, the fastest of --repeats kept
per (method, prompt)). The speedups are the harness's measured speedup over the baseline
(prefill excluded): on the wall clock with its 95% bootstrap interval over prompts, and on this
process's CPU time. Quality is measured against the target (specdec.reference.bild.quality):
greedy match rate, exact-match prefix, teacher-forced target-argmax rate and target
log-likelihood. Writes the trade-off figure and the rows as JSON, prints a Markdown report
(the tables of benchmarks/RESULTS.md).

    flock /tmp/specdec-cpu.lock .venv/bin/python benchmarks/bench_bild.py \\
        [--ngram .cache/ngram/aligned-3gram] [--prompts 5] [--new-tokens 40] [--threads 1] [--repeats 2]
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specdec.figures.bild import bild_tradeoff  # noqa: E402
from specdec.reference.data.corpus import eval_prompts  # noqa: E402
from specdec.reference.bild.rollback import parse_rollback  # noqa: E402
from specdec.strict_json import to_json  # noqa: E402
from specdec.reference.bild.sweep import run_sweep, sweep_methods  # noqa: E402
from specdec.reference.model.kv_session import KVSession  # noqa: E402
from specdec.reference.model.models import load_model  # noqa: E402
from specdec.reference.drafters.ngram import NgramDrafter  # noqa: E402
from specdec.reference.core.sampling import SamplingConfig  # noqa: E402
from specdec.reference.model.target import TargetScorer  # noqa: E402
from specdec.reference.measure.harness import Run  # noqa: E402


def parse_rollbacks(text: str) -> list:
    return [parse_rollback(t) for t in text.split(",") if t.strip()]


def pass_cost(model, context: list[int], sizes=(1, 2, 3, 4, 5, 8, 11), repeats: int = 5) -> dict[int, float]:
    """Fastest time (ms) of one target pass over k tokens after `context` (KV cache), per k:
    the verification cost v(k) that every method pays per large-model pass."""
    session = KVSession(model)
    best = {k: math.inf for k in sizes}
    for _ in range(repeats):
        for k in sizes:
            session.start(context)
            t0 = time.perf_counter()
            session.extend(context[:k - 1], n_logits=k)
            best[k] = min(best[k], 1e3 * (time.perf_counter() - t0))
    return best


def progress(t0: float) -> Callable[[Run], None]:
    """Prints each run of the sweep as it ends (to stderr), with the seconds since t0."""
    return lambda run: print(f"[{time.perf_counter() - t0:6.0f} s] {run.method}, prompt {run.prompt}, "
                             f"repeat {run.repeat}: {run.seconds:.2f} s", file=sys.stderr)


def equal_speed(rows: list[dict], x_key: str, tolerance: float = 0.05) -> list[dict]:
    """For each exact-SD row: the best-quality BiLD row at least (1 - tolerance) x as fast."""
    bild = [r for r in rows if r["kind"] == "bild"]
    out = []
    for sd in (r for r in rows if r["kind"] == "sd"):
        fast = [r for r in bild if r[x_key] >= sd[x_key] * (1 - tolerance)]
        out.append({"sd": sd, "bild": max(fast, key=lambda r: (r["argmax_rate"], r["match_rate"]), default=None)})
    return out


def markdown(report: dict) -> str:
    rows = report["rows"]
    lines = [f"- Date: {report['date']}", f"- Machine: {report['machine']}",
             f"- Command: `{report['command']}`",
             f"- Target: {report['target']}; little model: {report['little']}",
             f"- {report['prompts']} held-out prompts of {report['prompt_tokens']} tokens, up to "
             f"{report['new_tokens']} new tokens, greedy, EOS respected; each (method, prompt) run "
             f"{report['repeats']}x, fastest kept; wall time {report['wall_s']:.0f} s", "",
             "| method | speedup (CPU time) | speedup (wall) [95% CI] | tokens/pass | little share | greedy match | "
             "mean prefix | target-argmax | target loglik |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["speedup_ci"]
        lines.append(f"| {r['label']} | {r['speedup_cpu']:.2f} | {r['speedup']:.2f} [{lo:.2f}, {hi:.2f}] | "
                     f"{r['tokens_per_pass']:.2f} | "
                     f"{r['little_fraction']:.2f} | "
                     f"{r['match_rate']:.3f} | {r['mean_prefix']:.1f} | {r['argmax_rate']:.3f} | "
                     f"{r['mean_log_likelihood']:.3f} |")
    exact = [r for r in rows if r["kind"] == "bild" and r["argmax_rate"] >= 0.999]
    if exact:
        best = max(exact, key=lambda r: r["speedup_cpu"])
        lines += ["", f"Fastest BiLD point with target-level quality (target-argmax rate 1): {best['label']}, "
                      f"speedup {best['speedup_cpu']:.2f} (CPU time), greedy match {best['match_rate']:.3f}."]
    cost = report["pass_ms"]
    lines += ["", "Target pass cost v(k) (fastest of 5, ms, KV cache, 64-token context): "
              + ", ".join(f"k={k}: {v:.0f}" for k, v in cost.items())]
    lines += ["", "Equal speed (CPU-time speedups): for each exact SD point, the best-quality BiLD point at least "
                  "0.95x as fast:", "",
              "| exact SD | SD speedup | BiLD point | BiLD speedup | BiLD greedy match | BiLD target-argmax |",
              "|---|---|---|---|---|---|"]
    for e in equal_speed(rows, "speedup_cpu"):
        sd, b = e["sd"], e["bild"]
        if b is None:
            lines.append(f"| {sd['label']} | {sd['speedup_cpu']:.2f} | none as fast | | | |")
        else:
            lines.append(f"| {sd['label']} | {sd['speedup_cpu']:.2f} | {b['label']} | {b['speedup_cpu']:.2f} | "
                         f"{b['match_rate']:.3f} | {b['argmax_rate']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ngram", type=Path, default=REPO / ".cache" / "ngram" / "aligned-3gram")
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", "--max-new-tokens", dest="new_tokens", type=int, default=40)
    parser.add_argument("--fallbacks", default="0.05,0.1,0.2,0.4")
    parser.add_argument("--rollbacks", default="2,4,inf,argmax")
    parser.add_argument("--handovers", default="4")
    parser.add_argument("--gammas", default="1,2,4")
    parser.add_argument("--max-little-steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: least sensitive to other jobs)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per (method, prompt); the fastest is kept")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks", help="folder for the figure and JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    load_start = os.getloadavg()

    target = load_model(None)
    little = NgramDrafter(args.ngram, target.vocab_size)
    prompts = [list(p.ids) for p in eval_prompts(args.prompts, args.prompt_tokens)]
    methods = sweep_methods([float(x) for x in args.fallbacks.split(",")], parse_rollbacks(args.rollbacks),
                            [int(x) for x in args.gammas.split(",")],
                            [int(x) for x in args.handovers.split(",") if x.strip()], args.max_little_steps)
    pass_ms = pass_cost(target.model, prompts[0])
    rows = run_sweep(TargetScorer(target.model), little, prompts, methods, args.new_tokens, SamplingConfig(0.0),
                     seed=0, eos_id=target.tokenizer.eos_token_id, repeats=args.repeats,
                     progress=progress(t0))
    report = {"date": time.strftime("%Y-%m-%d"),
              "machine": f"{platform.machine()} {os.cpu_count()} cores, no GPU, torch {torch.__version__}, "
                         f"{torch.get_num_threads()} torch thread(s); load average {load_start[0]:.2f} at start, "
                         f"{os.getloadavg()[0]:.2f} at end",
              "command": "flock /tmp/specdec-cpu.lock .venv/bin/python benchmarks/bench_bild.py " + " ".join(sys.argv[1:]),
              "target": str(target.path.name), "little": f"ngram:{args.ngram.name}",
              "prompts": len(prompts), "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
              "repeats": args.repeats, "pass_ms": pass_ms,
              "wall_s": time.perf_counter() - t0, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "RESULTS-bild.json").write_text(to_json(report, indent=1) + "\n")
    bild_tradeoff(rows, args.out, title=f"BiLD vs exact SD: SmolLM2-135M target, n-gram {args.ngram.name} little "
                                        f"model, {len(prompts)} prompts x {args.new_tokens} tokens, 2-core CPU",
                  name="RESULTS-bild.png", x_key="speedup_cpu")
    print(markdown(report))


if __name__ == "__main__":
    main()
