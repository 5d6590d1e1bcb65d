"""A real llama-server, paired: no speculation against n-gram speculation (ngram-simple,
ngram-mod) on the same prompts, repeats interleaved (the order of the configurations rotates
each repeat), beside the prediction specdec makes from the counts the engine reported.

    .venv/bin/python benchmarks/bench_llamacpp.py [--repeats 3] [--new-tokens 128] [--json out.json]

Measured: the engine's own decode time per token (timings.predicted_ms / predicted_n, the
prompt excluded), summed over the repeats; the speedup is no speculation's ms per token over
the configuration's, with the range of the per-repeat ratios. Reported counts: the deltas of
the server's /metrics counters around each request (drafts, draft tokens, accepted tokens,
accepted per position), summed.

Predicted, from those counts and the engine's own verify cost v(k) (llama-bench: one pass over
k tokens at the prompts' context depth, over one token; or, with --costs, the server's own t(k)
from `specdec llamacpp costs`. llama-bench's one-token pass is its prompt path, not the server's
decode step: at -t 1, depth 235, 17.0 ms against the server's 13.7 ms, so its v(k) comes out ~20 %
low and the "steps" prediction high — why the first runs below over-predicted):
- "steps": the steps that ran — n tokens came from D verify steps (D + A tokens: A accepted
  drafts plus one each) and U = n - D - A plain steps, so time = t(1) (U + D v(G / D + 1)) for
  G draft tokens (the mean draft length; v interpolated) and speedup = n / (U + D v(G / D + 1)).
- "plan": what `specdec plan --from <these counts> --verify-cost <v> --c 0` advises (the best
  fixed draft length gamma and its predicted speedup, every iteration drafting gamma tokens).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from specdec.engines.acceptance import acceptance_from_counts
from specdec.engines.counts import EngineCounts
from specdec.engines.llamacpp.client import Client
from specdec.engines.llamacpp.metrics import PER_POS, PROMETHEUS
from specdec.engines.llamacpp.server import LlamaServer, ServerConfig, build_info, default_model, find_binary
from specdec.engines.counts import prometheus_counters
from specdec.errors import SpecdecError
from specdec.simulator.counts import conditional_from_cumulative
from specdec.simulator.engine_plan import engine_plan

PASSAGE = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
           "want of a wife. However little known the feelings or views of such a man may be on his first entering "
           "a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
           "considered the rightful property of some one or other of their daughters.")
CODE = ("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n"
        "    return a * b\n\n\ndef div(a, b):\n")
PROMPTS = {  # name: (endpoint, prompt)
    "copy": ("chat", "Repeat this passage exactly:\n\n" + PASSAGE),
    "code": ("completion", CODE),
    "story": ("chat", "Write a short story about a lighthouse keeper who finds a message in a bottle."),
}
VERIFY_K = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def verify_cost(binary: Path, model: Path, depth: int, threads: int,
                repeats: int) -> tuple[dict[int, float], float]:
    """v(k) = t(k) / t(1): llama-bench's best time of one pass over k tokens at `depth` tokens of context."""
    bench = binary.parent / "llama-bench"
    if not bench.is_file():
        raise SpecdecError(f"no {bench}: rerun scripts/llamacpp.sh")
    out = subprocess.run([str(bench), "-m", str(model), "-p", ",".join(map(str, VERIFY_K)), "-n", "0", "-d",
                          str(depth), "-t", str(threads), "-r", str(repeats), "-o", "json"],
                         capture_output=True, text=True, check=True, timeout=900).stdout
    seconds = {int(row["n_prompt"]): min(row["samples_ns"]) / 1e9 for row in json.loads(out)}  # best of repeats
    return {k: max(1.0, seconds[k] / seconds[1]) for k in sorted(seconds)}, seconds[1]  # v >= 1, as plans take it


def server_cost(path: Path, depth: int) -> tuple[dict[int, float], float]:
    """v(k) = t(k) / t(1) at `depth` from the server's own timings (`specdec llamacpp costs`)."""
    from specdec.engines.llamacpp.validation import EngineCosts
    from specdec.strict_json import loads

    try:
        costs = EngineCosts.from_file(loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise SpecdecError(f"--costs {path}: not a llama.cpp cost file ({str(exc)[:100]})") from None
    t1 = costs.t(1, depth)
    return {k: max(1.0, costs.t(k, depth) / t1) for k in range(1, len(costs.seconds[0]) + 1)}, t1


def request(client: Client, endpoint: str, prompt: str, new_tokens: int, seed: int):
    if endpoint == "chat":
        return client.chat([{"role": "user", "content": prompt}], new_tokens, temperature=0.0, seed=seed)
    return client.complete(prompt, new_tokens, temperature=0.0, seed=seed)


def counters(page: str) -> tuple[np.ndarray, np.ndarray]:
    """(drafts, draft tokens, accepted tokens), accepted per position (64 wide) of a /metrics page."""
    totals, per_pos = prometheus_counters(page, PROMETHEUS, PER_POS)
    head = np.array([totals.get(PROMETHEUS + "num_" + k, 0.0) for k in ("drafts", "draft_tokens", "accepted_tokens")])
    pos = np.zeros(1024)
    for i, v in per_pos.items():
        pos[i] = v
    return head, pos


def predictions(n: int, head: np.ndarray, pos: np.ndarray, v: dict[int, float]) -> dict:
    """The "steps" and "plan" predictions of the module's docstring from summed counts."""
    drafts, generated, accepted = (int(x) for x in head)
    if drafts == 0:
        return {"steps": 1.0, "plan_gamma": None, "plan_speedup": None, "tokens_per_step": None, "mean_draft": None}
    ks = np.array(sorted(v))
    mean_draft = generated / drafts
    v_mean = float(np.interp(mean_draft + 1, ks, [v[k] for k in ks]))
    plain = max(n - drafts - accepted, 0)
    steps = n / (plain + drafts * v_mean)
    k = int(np.max(np.nonzero(pos)[0])) + 1 if pos.any() else 1
    acc, reached = conditional_from_cumulative(drafts, pos[:k].astype(np.int64))
    counts = EngineCounts("llamacpp-prometheus", acc.tolist(), reached.tolist(), drafts, generated, accepted, k)
    curve = [v[kk] for kk in ks if kk <= ks.max()]
    dense = list(np.interp(np.arange(1, ks.max() + 1), ks, curve))
    plan = engine_plan(acceptance_from_counts(counts), 0.0, counts.source, verify_cost=dense).plan
    return {"steps": steps, "plan_gamma": plan.optimal_gamma,
            "plan_speedup": float(plan.walltime_improvement[plan.optimal_gamma]),
            "tokens_per_step": (drafts + accepted) / drafts, "mean_draft": mean_draft}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--types", default="ngram-simple,ngram-mod", help="speculation types besides none")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--depth", type=int, default=128, help="context depth of llama-bench's v(k)")
    ap.add_argument("--llama-server", default=None, help="a llama-server binary (default: scripts/llamacpp.sh's)")
    ap.add_argument("--costs", type=Path, default=None,
                    help="the engine's cost file (`specdec llamacpp costs`): v(k) from the server's own steps")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    for option in ("repeats", "new_tokens", "threads", "depth"):
        if getattr(args, option) < 1:
            print(f"error: --{option.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    try:
        binary, model = find_binary(args.llama_server), default_model()
        types = ["none"] + [t for t in args.types.split(",") if t]
        v, t1 = server_cost(args.costs, args.depth) if args.costs else verify_cost(binary, model, args.depth,
                                                                                   args.threads, 5)
        rows = run(binary, model, types, args)
    except SpecdecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the servers are stopped by their contexts on the way out
        print("interrupted", file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as exc:
        print(f"error: llama-bench failed (status {exc.returncode}): {exc.stderr.strip()[-200:]}", file=sys.stderr)
        return 1
    info = build_info(binary)
    print(f"llama.cpp {info.get('llama_cpp_commit', '?')[:12]} ({info.get('sdist', '?')}), {model.name}, "
          f"{args.threads} threads, T = 0, {args.new_tokens} new tokens, {args.repeats} interleaved repeats")
    print(f"{'cost file' if args.costs else 'llama-bench'} at depth {args.depth}: t(1) {1e3 * t1:.2f} ms, v(k) "
          + " ".join(f"{k}:{x:.2f}" for k, x in v.items()))
    table(rows, types, v)
    if args.json is not None:
        args.json.write_text(json.dumps({"build": info, "verify_cost": v, "t1_seconds": t1, "rows": rows,
                                         "args": vars(args)}, default=str, indent=1))
    return 0


def run(binary: Path, model: Path, types: list[str], args) -> dict:
    """Every (prompt, type): per repeat the engine's decode ms and tokens, and the summed counts.
    Each repeat starts fresh servers (ngram-mod and ngram-cache learn across requests: a repeat
    must not draft from the one before), all types alive at once, their order rotating."""
    rows: dict = {p: {t: {"ms": [], "n": [], "head": np.zeros(3), "pos": np.zeros(1024)} for t in types}
                  for p in PROMPTS}
    for r in range(args.repeats):
        with ExitStack() as stack:
            clients = {}
            for t in types:
                config = ServerConfig(model, spec_type=None if t == "none" else t, threads=args.threads)
                clients[t] = Client(stack.enter_context(LlamaServer(config, binary)).url)
                clients[t].complete("Hello", 8)  # warm-up, untimed: a fresh server's first request ran 10-100x slower
            for p, (endpoint, prompt) in PROMPTS.items():
                for t in types[r % len(types):] + types[:r % len(types)]:
                    before = counters(clients[t].metrics())
                    done = request(clients[t], endpoint, prompt, args.new_tokens, seed=r)
                    after = counters(clients[t].metrics())
                    cell = rows[p][t]
                    cell["ms"].append(done.decode_ms)
                    cell["n"].append(done.tokens)
                    cell["head"] += after[0] - before[0]
                    cell["pos"] += after[1] - before[1]
    return rows


def table(rows: dict, types: list[str], v: dict[int, float]) -> None:
    print(f"{'prompt':<7}{'spec type':<14}{'ms/token':>9}{'measured':>10}{'(range)':>14}{'tok/step':>9}"
          f"{'mean draft':>11}{'pred steps':>11}{'plan g':>7}{'plan pred':>10}")
    for p, by_type in rows.items():
        base = by_type["none"]
        base_ms = sum(base["ms"]) / sum(base["n"])
        for t in types:
            cell = by_type[t]
            ms = sum(cell["ms"]) / sum(cell["n"])
            ratios = [(b / nb) / (m / n) for b, nb, m, n in zip(base["ms"], base["n"], cell["ms"], cell["n"])]
            pred = predictions(int(sum(cell["n"])), cell["head"], cell["pos"], v)
            cell["measured"], cell["predicted"] = base_ms / ms, pred
            cell["head"], cell["pos"] = cell["head"].tolist(), [x for x in cell["pos"].tolist() if x]
            print(f"{p:<7}{t:<14}{ms:>9.2f}{base_ms / ms:>9.2f}x  [{min(ratios):.2f}, {max(ratios):.2f}]"
                  f"{_fmt(pred['tokens_per_step'], '.2f'):>9}{_fmt(pred['mean_draft'], '.1f'):>11}"
                  f"{pred['steps']:>10.2f}x{_fmt(pred['plan_gamma'], 'd'):>7}"
                  f"{_fmt(pred['plan_speedup'], '.2f', 'x'):>10}")


def _fmt(x, spec: str, unit: str = "") -> str:
    return "-" if x is None else format(x, spec) + unit


if __name__ == "__main__":
    sys.exit(main())
