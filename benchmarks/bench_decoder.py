"""Decoder speed on the default target (issue 3), one run side by side on the same prompts.

1. Autoregressive baseline vs Hugging Face `generate` (greedy): tokens/s and identical output.
2. Speculative decoding with our prompt-lookup drafter vs HF `generate(prompt_lookup_num_tokens=γ)`.
3. Context-length scaling: time per generated token at 64 vs 1024 tokens of context, and the
   per-iteration overhead outside the target's forward pass (must not grow with context).

Methods are interleaved per repeat (rotating which goes first) so drift in the machine's speed
hits all of them alike; each of ours is compared with its HF counterpart by the median of the
per-repeat time ratios. Our prompt lookup runs twice: with HF's matching rule
(`lookup:2:earliest`: the same proposals, so the same forward passes: a pure implementation
comparison) and with the default rule (latest match, n-grams up to 3). Ours run as
`specdec decode` does, with the prompt's encoding fused into the first iteration's pass
(`fuse_prefill=True`), which is also what HF does: the "target passes" column counts every
forward pass of the model with a hook, for HF and ours alike. Usage:
    .venv/bin/python benchmarks/bench_decoder.py [--new-tokens 64] [--repeats 9] [--gamma 4] [--target-backend fast]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from specdec.reference.core.loop import autoregressive_decode, speculative_decode
from specdec.reference.core.models import load_model
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.drafters.protocol import NoDrafter
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.target import TargetScorer

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


class PassCounter:
    """Counts the target's forward passes (one per decoding iteration for every method)."""

    def __init__(self, model) -> None:
        self.calls = 0
        model.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1


def methods_for(target, scorer, n: int, gamma: int) -> dict:
    eos = target.tokenizer.eos_token_id
    model = target.model

    def ours_lookup(max_ngram: int, match: str):
        return lambda ids: speculative_decode(scorer, PromptLookupDrafter(max_ngram, match=match), ids, n, gamma,
                                              GREEDY, None, eos, fuse_prefill=True).tokens
    return {
        "HF generate (greedy)": lambda ids: hf_generate(model, ids, n, eos, None),
        "specdec autoregressive": lambda ids: autoregressive_decode(scorer, ids, n, GREEDY, None, eos,
                                                                    fuse_prefill=True).tokens,
        f"HF generate prompt_lookup_num_tokens={gamma}": lambda ids: hf_generate(model, ids, n, eos, gamma),
        f"specdec lookup:2:earliest (HF's rule), gamma={gamma}": ours_lookup(2, "earliest"),
        f"specdec lookup (latest, n<=3), gamma={gamma}": ours_lookup(3, "latest"),
    }


# each of ours is compared with the HF method of the same work: AR with greedy, lookup with lookup
PAIRS = {1: 0, 3: 2, 4: 2}


def speed_table(target, n: int, repeats: int, gamma: int) -> list[str]:
    """Per prompt: tokens/s (total tokens / total seconds over the repeats), forward passes, and
    the paired ratio ours / HF: per repeat the methods run back to back, the ratio of their
    times is taken within the repeat (so the machine's speed drift cancels), and the median
    over repeats is reported with its range."""
    tok = target.tokenizer
    scorer = TargetScorer(target.model)
    counter = PassCounter(target.model)
    methods = methods_for(target, scorer, n, gamma)
    names = list(methods)
    rows = [f"| prompt | method | new tokens | target passes | tokens/s ({repeats} repeats) | "
            f"speed vs HF counterpart: median of per-repeat ratios [min, max] | same output as HF greedy |",
            "|---|---|---|---|---|---|---|"]
    totals = {m: [0, 0.0] for m in names}
    all_ratios: dict[str, list[float]] = {m: [] for m in names}
    for name, text in PROMPTS.items():
        ids = tok(text)["input_ids"]
        outs, passes = {}, {}
        for m, fn in methods.items():  # warm-up, output and pass count
            counter.calls = 0
            outs[m] = fn(ids)
            passes[m] = counter.calls
        times = {m: [] for m in names}
        for r in range(repeats):
            order = names[r % len(names):] + names[:r % len(names)]  # rotate who goes first
            for m in order:
                times[m].append(timed(lambda: methods[m](ids))[1])
        ref = outs[names[0]]
        for i, m in enumerate(names):
            tokens = len(outs[m]) * repeats
            totals[m][0] += tokens
            totals[m][1] += sum(times[m])
            if i in PAIRS:
                hf = names[PAIRS[i]]
                ratios = [h / o for h, o in zip(times[hf], times[m])]
                all_ratios[m] += ratios
                vs = f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]"
            else:
                vs = ""
            rows.append(f"| {name} | {m} | {len(outs[m])} | {passes[m]} | {tokens / sum(times[m]):.2f} | {vs} | "
                        f"{outs[m] == ref} |")
    for i, m in enumerate(names):
        n_tok, sec = totals[m]
        vs = ""
        if i in PAIRS:
            r = all_ratios[m]
            vs = (f"{statistics.median(r):.3f} [{min(r):.3f}, {max(r):.3f}]; total time ratio "
                  f"{totals[names[PAIRS[i]]][1] / sec:.3f}")
        rows.append(f"| all prompts | {m} | {n_tok // repeats} | | {n_tok / sec:.2f} | {vs} | |")
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
        for label, drafter in (("autoregressive", NoDrafter()), (f"lookup gamma={gamma}", PromptLookupDrafter(3))):
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
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--target-backend", default="eager", choices=("eager", "fast"),
                        help="fast: the packed-weight kernel (HF generate then runs on it too)")
    args = parser.parse_args()
    target = load_model(None, backend=args.target_backend)
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}; "
          f"target {target.path.name} float32 on CPU, backend {target.backend}")
    print("\n".join(speed_table(target, args.new_tokens, args.repeats, args.gamma)))
    print()
    print("\n".join(context_table(target, args.repeats, args.gamma)))


if __name__ == "__main__":
    main()
