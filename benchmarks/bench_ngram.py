"""Benchmark the KenLM n-gram drafters on the default target (SmolLM2-135M-Instruct, CPU).

Measures, for models trained on the real Shakespeare + Austen token ids (and on the
target-aligned corpus):

1. build time and size of each model (orders 2..5, plain / aligned / mixed), from the
   model.json each build wrote (models are built once into .cache/ngram/, reused after);
2. the time to produce q over the whole 49,152-token vocabulary for one position
   (`NgramModel.log_q`, and `q` = its exp), median and p90 over held-out contexts;
3. the drafter's per-token cost inside `propose` (greedy and sampled), and c = that cost
   over one target step (a 1-token forward with a KV cache at ~128 tokens of context);
4. greedy drafting throughput (tokens/s);
5. how well q matches p (informational): alpha = E[sum_x min(p, q)] at temperature 1 on
   target-sampled continuations of held-out prompts, and the greedy agreement rate
   argmax q == argmax p on target-greedy continuations;
6. end to end (--decode-prompts): the baseline and speculative decoding with the n-gram at
   gamma 1, 2, 4, greedy and at T=1, interleaved through the comparison harness
   (`specdec.reference.measure.harness.measure`); the speedup is the harness's measured speedup
   (`specdec.reference.measure.speedup.speedup`: seconds per token, prefill excluded, with a 95%
   bootstrap interval over the prompts).

    .venv/bin/python benchmarks/bench_ngram.py [--orders 2 3 4 5] [--corpora plain aligned mixed]
        [--json out.json]

Prints a Markdown report (the tables of benchmarks/RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specdec.reference.data.corpus import eval_prompts  # noqa: E402
from specdec.ngram.model import NgramModel  # noqa: E402
from specdec.reference.data.default_model import default_target_path  # noqa: E402
from specdec.reference.drafters.ngram import NgramDrafter  # noqa: E402
from specdec.reference.core.sampling import SamplingConfig  # noqa: E402
from specdec.reference.core.seams import NO_PASS, Verdict  # noqa: E402
from specdec.reference.model.seq2seq import new_cache, with_cache  # noqa: E402

MODELS = REPO / ".cache" / "ngram"
VOCAB = 49152


def build(order: int, corpus: str, rebuild: bool) -> Path:
    """The model folder .cache/ngram/<corpus>-<order>gram, built with the CLI if missing."""
    out = MODELS / f"{corpus}-{order}gram"
    if rebuild or not (out / "model.json").is_file():
        subprocess.run([sys.executable, "-m", "specdec", "ngram", "build", "--order", str(order),
                        "--corpus", corpus, "--out", str(out), "--json", "--threads", "1"],
                       check=True, stdout=subprocess.DEVNULL)
    return out


def timed(fn, repeats: int) -> np.ndarray:
    out = np.empty(repeats)
    for i in range(repeats):
        t = time.perf_counter()
        fn(i)
        out[i] = time.perf_counter() - t
    return out


def q_timing(model: NgramModel, contexts: list[list[int]]) -> dict:
    states = [model.state_for(c) for c in contexts]
    model.log_q(states[0])  # warm-up
    log_q = timed(lambda i: model.log_q(states[i]), len(states))
    probs = timed(lambda i: model.q(states[i]), len(states))
    return {"log_q_median_ms": 1e3 * float(np.median(log_q)), "log_q_p90_ms": 1e3 * float(np.percentile(log_q, 90)),
            "q_median_ms": 1e3 * float(np.median(probs)), "q_p90_ms": 1e3 * float(np.percentile(probs, 90))}


GAMMAS = (1, 2, 4)  # of the end-to-end decode sweep
SAMPLINGS = {"greedy": SamplingConfig(0.0), "sampled": SamplingConfig(1.0),
             "sampled_topk50_topp0.9_t0.7": SamplingConfig(0.7, top_k=50, top_p=0.9)}


def propose_timing(path: Path, prompts: list[list[int]], gamma: int = 8) -> dict:
    """Per-token cost of propose (greedy, sampled at T=1, and with top-k/top-p) and greedy
    drafting throughput."""
    drafter = NgramDrafter(path, VOCAB)
    out = {}
    for name, sampling in SAMPLINGS.items():
        gen = torch.Generator().manual_seed(0)
        per_token = []
        for prompt in prompts:
            drafter.start(prompt)
            t = time.perf_counter()
            proposal = drafter.propose(gamma, sampling, gen)
            per_token.append((time.perf_counter() - t) / max(1, len(proposal)))
        out[f"{name}_ms_per_token"] = 1e3 * float(np.median(per_token))
    drafter.start(prompts[0])
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < 2.0:
        proposal = drafter.propose(64, SamplingConfig(0.0), None)
        tokens = proposal.tokens if len(proposal) else torch.tensor([0])  # (an empty proposal: commit one token)
        drafter.commit(Verdict(len(tokens) - 1, tokens, False), NO_PASS)  # keep every draft, the last as the target's
        n += len(proposal)
    out["greedy_tokens_per_second"] = n / (time.perf_counter() - t)
    return out


@torch.inference_mode()
def target_step_ms(model, threads: int, context: int = 128, repeats: int = 30) -> float:
    """Median time of a 1-token forward with a KV cache holding `context` tokens."""
    torch.set_num_threads(threads)
    ids = torch.randint(100, 40000, (1, context))
    cache = new_cache(model)
    model(ids, **with_cache(model, cache))
    times = []
    for _ in range(repeats + 3):
        nxt = torch.randint(100, 40000, (1, 1))
        t = time.perf_counter()
        model(nxt, **with_cache(model, cache))
        times.append(time.perf_counter() - t)
        cache.crop(-1)  # transformers 5: a negative count removes that many tokens
    return 1e3 * float(np.median(times[3:]))


@torch.inference_mode()
def continuations(model, prompts: list[tuple[int, ...]], n: int, temperature: float) -> list[list[int]]:
    torch.manual_seed(0)
    ids = torch.tensor([list(p) for p in prompts])
    kwargs = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else \
        dict(do_sample=False)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                         pad_token_id=2, eos_token_id=None, **kwargs)
    return out[:, ids.shape[1]:].tolist()


@torch.inference_mode()
def target_probs(model, sequences: list[list[int]]) -> torch.Tensor:
    """p at every position: float32 [batch, len, vocab] (row i predicts token i+1)."""
    return model(torch.tensor(sequences)).logits.float().softmax(-1)


def decode_sweep(target, path: Path, prompts: list[list[int]], new_tokens: int = 48) -> dict:
    """End-to-end speculative decoding with the n-gram drafter against the autoregressive
    baseline (same loop, same cache handling), per (mode, gamma): all run interleaved through
    the comparison harness; the speedup is the harness's measured speedup over the baseline
    (prefill excluded) with its 95% bootstrap interval over the prompts."""
    from specdec.reference.model.target import TargetScorer
    from specdec.reference.measure.harness import Decoding, baseline, measure
    from specdec.reference.measure.speedup import speedup

    torch.set_num_threads(1)
    scorer = TargetScorer(target)
    out: dict = {}
    for mode, sampling in (("greedy", SamplingConfig(0.0)), ("t1", SamplingConfig(1.0))):
        methods = [baseline()] + [Decoding(f"gamma{g}", NgramDrafter(path, VOCAB), g) for g in GAMMAS]
        runs = measure(methods, scorer, prompts, new_tokens, sampling, warm_up=4)
        base = runs["baseline"]
        out[f"{mode}_baseline_tokens_per_s"] = sum(r.tokens for r in base) / sum(r.seconds for r in base)
        for g in GAMMAS:
            mine = runs[f"gamma{g}"]
            c = speedup(base, mine)
            accepted = sum(sum(r.stats.accepted) for r in mine)  # counts; alpha is derived here
            reached = sum(sum(r.stats.reached) for r in mine)
            same = all(r.output == b.output for r, b in zip(mine, base))
            out[f"{mode}_gamma{g}"] = {"tokens_per_s": sum(r.tokens for r in mine) / sum(r.seconds for r in mine),
                                       "speedup": c.speedup, "speedup_ci": list(c.ci),
                                       "alpha": accepted / reached if reached else None,
                                       **({"same_tokens_as_baseline": same} if mode == "greedy" else {})}
    return out


def agreement(models: dict[str, NgramModel], prompts, sampled, greedy, p_sampled, p_greedy) -> dict:
    """alpha at T=1 and the greedy agreement rate over the continuation positions."""
    out = {}
    plen = len(prompts[0])
    for name, model in models.items():
        alphas, agree = [], []
        for b, prompt in enumerate(prompts):
            for seq, p, acc in ((list(prompt) + sampled[b], p_sampled[b], alphas),
                                (list(prompt) + greedy[b], p_greedy[b], agree)):
                q = torch.from_numpy(model.score_sequence(seq))          # [len, V]
                rows = slice(plen - 1, len(seq) - 1)                     # positions predicting the continuation
                if acc is alphas:
                    acc.extend(torch.minimum(p[rows], q[rows]).sum(-1).tolist())
                else:
                    acc.extend((p[rows].argmax(-1) == q[rows].argmax(-1)).float().tolist())
        out[name] = {"alpha_t1": float(np.mean(alphas)), "greedy_agreement": float(np.mean(agree))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--corpora", nargs="+", default=["plain", "aligned", "mixed"])
    parser.add_argument("--timing-order", type=int, default=4, help="model used for the c measurement")
    parser.add_argument("--prompts", type=int, default=24, help="held-out prompts for alpha")
    parser.add_argument("--decode-prompts", type=int, default=3,
                        help="held-out prompts for the end-to-end decode sweep (0: skip)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for everything but the 2-thread target step reference")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    results: dict = {"date": time.strftime("%Y-%m-%d"), "machine": {
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "load_average_start": os.getloadavg(),
        "gpu": torch.cuda.is_available()}}
    paths = {(c, o): build(o, c, args.rebuild) for c in args.corpora for o in args.orders}
    results["builds"] = {f"{c}-{o}gram": json.loads((p / "model.json").read_text()) for (c, o), p in paths.items()}

    prompts = eval_prompts(args.prompts, min_tokens=128)
    contexts = [list(p.ids[:k]) for p in prompts for k in range(8, 129, 8)]  # varied context lengths
    models = {f"{c}-{o}gram": NgramModel.load(p, VOCAB) for (c, o), p in paths.items()}
    results["q_timing"] = {name: q_timing(m, contexts) for name, m in models.items()}
    timing_path = paths[("plain", args.timing_order)] if ("plain", args.timing_order) in paths else next(iter(paths.values()))
    results["propose"] = propose_timing(timing_path, [list(p.ids) for p in prompts])
    results["propose"]["model"] = timing_path.name

    from transformers import AutoModelForCausalLM
    target = AutoModelForCausalLM.from_pretrained(default_target_path(), dtype=torch.float32).eval()
    results["target_step_ms"] = {f"threads={t}": target_step_ms(target, t) for t in (2, 1)}
    step = results["target_step_ms"]["threads=1"]
    results["c"] = {k: results["propose"][f"{k}_ms_per_token"] / step for k in SAMPLINGS}
    results["c_reference_step_ms"] = step

    short = [p.ids[:64] for p in prompts]
    sampled = continuations(target, short, 64, 1.0)
    greedy = continuations(target, short, 64, 0.0)
    p_sampled = target_probs(target, [list(p) + s for p, s in zip(short, sampled)])
    p_greedy = target_probs(target, [list(p) + g for p, g in zip(short, greedy)])
    results["agreement"] = agreement(models, short, sampled, greedy, p_sampled, p_greedy)
    if args.decode_prompts:
        results["decode"] = decode_sweep(target, paths[("plain", args.timing_order)],
                                         [list(p.ids[:64]) for p in prompts[:args.decode_prompts]])
    results["machine"]["load_average_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))


def markdown(r: dict) -> str:
    lines = [f"date {r['date']}; machine: {r['machine']}", "",
             "| model | n-gram counts | lmplz s | build_binary s | tables s | ARPA MB | binary MB | tables MB | train tokens |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, b in r["builds"].items():
        lines.append(f"| {name} | {' / '.join(f'{n:,}' for n in b['counts'])} | {b['lmplz_seconds']:.2f} | "
                     f"{b['build_binary_seconds']:.2f} | {b['tables_seconds']:.2f} | {b['arpa_bytes'] / 1e6:.1f} | "
                     f"{b['binary_bytes'] / 1e6:.1f} | {b['tables_bytes'] / 1e6:.1f} | {b['training_tokens']:,} |")
    lines += ["", "| model | log q median ms | log q p90 ms | q median ms | q p90 ms | alpha (T=1) | greedy agreement |",
              "|---|---|---|---|---|---|---|"]
    for name, t in r["q_timing"].items():
        a = r["agreement"][name]
        lines.append(f"| {name} | {t['log_q_median_ms']:.3f} | {t['log_q_p90_ms']:.3f} | {t['q_median_ms']:.3f} | "
                     f"{t['q_p90_ms']:.3f} | {a['alpha_t1']:.3f} | {a['greedy_agreement']:.3f} |")
    p = r["propose"]
    lines += ["", f"propose ({p['model']}), ms per drafted token and c = that / target step "
                  f"({r['c_reference_step_ms']:.1f} ms, 1 thread; all steps: {r['target_step_ms']}):", "",
              "| sampling | ms/token | c |", "|---|---|---|"]
    lines += [f"| {k} | {p[f'{k}_ms_per_token']:.3f} | {r['c'][k]:.4f} |" for k in r["c"]]
    lines += ["", f"greedy drafting throughput: {p['greedy_tokens_per_second']:.0f} tokens/s"]
    if "decode" in r:
        d = r["decode"]
        lines += ["", "| decode | tokens/s | speedup vs baseline [95% CI] | alpha (accepted / reached) | "
                      "greedy output = baseline |", "|---|---|---|---|---|"]
        for mode in ("greedy", "t1"):
            lines.append(f"| {mode} baseline | {d[f'{mode}_baseline_tokens_per_s']:.1f} | 1 | | |")
            for g in GAMMAS:
                e = d[f"{mode}_gamma{g}"]
                lo, hi = e["speedup_ci"]
                lines.append(f"| {mode} gamma={g} | {e['tokens_per_s']:.1f} | {e['speedup']:.2f} [{lo:.2f}, {hi:.2f}] "
                             f"| {e['alpha'] or 0:.3f} | {e.get('same_tokens_as_baseline', '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
