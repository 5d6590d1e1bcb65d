"""Decoder speed on the default target (issue 3), one run side by side on the same prompts.

1. Autoregressive baseline vs Hugging Face `generate` (greedy): tokens/s and identical output.
2. Speculative decoding with our prompt-lookup drafter vs HF `generate(prompt_lookup_num_tokens=γ)`.
3. Context-length scaling: time per generated token at 64 vs 1024 tokens of context, and the
   per-iteration overhead outside the target's forward pass (must not grow with context).

Methods are interleaved per repeat so drift in machine load hits all of them alike; the
median over repeats is reported. Usage:
    .venv/bin/python benchmarks/bench_decoder.py [--new-tokens 64] [--repeats 3] [--gamma 4]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from reference.decoder import autoregressive_decode, speculative_decode
from reference.models import load_model
from reference.prompt_lookup import PromptLookupDrafter
from reference.sampling import SamplingConfig
from reference.target import TargetScorer

PROMPTS = {
    "story": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "rewrite": ("Rewrite the following paragraph in the past tense.\n\nThe cat sits on the mat. It watches "
                "the birds in the garden and waits for the sun to set. Then it walks to the kitchen, where the "
                "old woman gives it a bowl of milk. The cat drinks the milk and falls asleep by the fire.\n\n"
                "Past tense:\n"),
    "code": ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
             "    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\ndef factorial(n):\n    \"\"\"Return n!.\"\"\"\n"),
}
GREEDY = SamplingConfig(temperature=0.0)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def hf_generate(model, ids: list[int], n: int, eos: int, lookup: int | None) -> list[int]:
    kwargs = {"prompt_lookup_num_tokens": lookup} if lookup else {}
    x = torch.tensor([ids])
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                         eos_token_id=eos, pad_token_id=eos, **kwargs)
    return out[0, len(ids):].tolist()


def speed_table(target, n: int, repeats: int, gamma: int) -> list[str]:
    tok, model = target.tokenizer, target.model
    eos = tok.eos_token_id
    scorer = TargetScorer(model)
    methods = {
        "HF generate (greedy)": lambda ids: hf_generate(model, ids, n, eos, None),
        "specdec autoregressive": lambda ids: autoregressive_decode(scorer, ids, n, GREEDY, None, eos).tokens,
        f"HF generate prompt_lookup_num_tokens={gamma}": lambda ids: hf_generate(model, ids, n, eos, gamma),
        f"specdec lookup drafter, gamma={gamma}": lambda ids: speculative_decode(
            scorer, PromptLookupDrafter(3), ids, n, gamma, GREEDY, None, eos).tokens,
    }
    rows = ["| prompt | method | new tokens | tokens/s (median of %d) | vs HF greedy | same output as HF greedy |" % repeats,
            "|---|---|---|---|---|---|"]
    totals = {m: [0, 0.0] for m in methods}  # tokens, median seconds, summed over prompts
    for name, text in PROMPTS.items():
        ids = tok(text)["input_ids"]
        for fn in methods.values():  # warm-up
            fn(ids)
        times = {m: [] for m in methods}
        outs = {}
        for _ in range(repeats):
            for m, fn in methods.items():
                outs[m], dt = timed(lambda: fn(ids))
                times[m].append(dt)
        ref = outs["HF generate (greedy)"]
        ref_tps = len(ref) / statistics.median(times["HF generate (greedy)"])
        for m in methods:
            tps = len(outs[m]) / statistics.median(times[m])
            totals[m][0] += len(outs[m])
            totals[m][1] += statistics.median(times[m])
            rows.append(f"| {name} | {m} | {len(outs[m])} | {tps:.2f} | {tps / ref_tps:.3f} | {outs[m] == ref} |")
    ref_all = totals["HF generate (greedy)"][0] / totals["HF generate (greedy)"][1]
    for m, (n_tok, sec) in totals.items():
        rows.append(f"| all prompts | {m} | {n_tok} | {n_tok / sec:.2f} | {n_tok / sec / ref_all:.3f} | |")
    return rows


def context_table(target, repeats: int, gamma: int, n: int = 32) -> list[str]:
    tok = target.tokenizer
    text = open(__file__).read() * 4  # plenty of varied tokens
    base = tok(text)["input_ids"]
    scorer = TargetScorer(target.model)
    rows = ["| context | method | ms / token (median) | overhead outside target pass, ms / iteration |",
            "|---|---|---|---|"]
    for ctx in (64, 1024):
        ids = base[:ctx]
        for label, drafter in (("autoregressive", None), (f"lookup gamma={gamma}", PromptLookupDrafter(3))):
            per_tok, overhead = [], []
            for _ in range(repeats):
                r = speculative_decode(scorer, drafter, ids, n, gamma, GREEDY, None, None)
                s = r.stats
                per_tok.append((s.time_total - s.time_prefill) / s.new_tokens * 1e3)
                overhead.append((s.time_total - s.time_prefill - s.time_verify) / s.iterations * 1e3)
            rows.append(f"| {ctx} | {label} | {statistics.median(per_tok):.1f} | {statistics.median(overhead):.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gamma", type=int, default=4)
    args = parser.parse_args()
    target = load_model(None)
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}; "
          f"target {target.path.name} float32 on CPU")
    print("\n".join(speed_table(target, args.new_tokens, args.repeats, args.gamma)))
    print()
    print("\n".join(context_table(target, args.repeats, args.gamma)))


if __name__ == "__main__":
    main()
