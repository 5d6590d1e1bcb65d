"""Decoder speed on the default target (issue 3), one run side by side on the same prompts.

1. Autoregressive baseline vs Hugging Face `generate` (greedy): tokens/s and identical output.
2. Speculative decoding with our prompt-lookup drafter vs HF `generate(prompt_lookup_num_tokens=γ)`.
3. Context-length scaling: time per generated token at 64 vs 1024 tokens of context, and the
   per-iteration overhead outside the target's forward pass (must not grow with context).

Every decode runs through the comparison harness (`specdec.reference.measure.harness.measure`:
methods interleaved per prompt and repeat, rotating which goes first, so drift in the machine's
speed hits all alike); HF `generate` is wrapped as a harness method (`HFGenerate`: its wall
time and token count fill the run's DecodeStats). "Speed vs HF counterpart" is the harness's
measured speedup (`specdec.reference.measure.speedup.speedup`: the HF method's seconds per
token / ours, with a 95% bootstrap interval over the paired runs). Our prompt lookup runs twice:
with HF's matching rule (`lookup:2:earliest`: the same proposals, so the same forward passes: a
pure implementation comparison) and with the default rule (latest match, n-grams up to 3). Ours
run as `specdec decode` does, with the prompt's encoding fused into the first iteration's pass
(`fuse_prefill=True`), which is also what HF does; the "target passes" column counts every
forward pass of the model (for HF: calls of `model.forward` during `generate`). The context
table's runs (prefill separate, excluded) come from the harness too. Usage:
    .venv/bin/python benchmarks/bench_decoder.py [--new-tokens 64] [--repeats 9] [--gamma 4] [--target-backend fast]
"""
from __future__ import annotations

import argparse
import functools
import platform
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import torch

from specdec.reference.core.loop import DecodeResult
from specdec.reference.model.models import load_model
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.core.stats import DecodeStats
from specdec.reference.core.scorer import Scorer
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.measure.harness import Decoding, Method, Run, baseline, measure
from specdec.reference.measure.speedup import speedup

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


@contextmanager
def counting_forward(model: torch.nn.Module) -> Iterator[list[int]]:
    """Counts calls of model.forward while open: yields [calls]. The count rides on an instance
    attribute that shadows the method (its signature kept, which HF's generate inspects) and is
    removed on exit; no hook stays behind."""
    calls = [0]
    forward = model.forward

    @functools.wraps(forward)
    def counted(*args, **kwargs):
        calls[0] += 1
        return forward(*args, **kwargs)

    shadowed = model.__dict__.get("forward")
    model.forward = counted
    try:
        yield calls
    finally:
        if shadowed is None:
            del model.forward
        else:
            model.forward = shadowed


@dataclass(frozen=True, eq=False)
class HFGenerate:
    """Hugging Face `generate` (greedy; with prompt lookup of `lookup` tokens when > 0) as a
    harness method: its wall time, token count and forward passes fill a DecodeStats. HF always
    fuses the prompt's encoding into its first pass, so no prefill is timed apart."""

    name: str
    model: torch.nn.Module
    lookup: int = 0

    def decode(self, scorer: Scorer, prompt: Sequence[int], new_tokens: int, sampling: SamplingConfig,
               generator: torch.Generator | None, eos_id: int | None, fuse_prefill: bool) -> DecodeResult:
        if not sampling.greedy:
            raise ValueError("HFGenerate runs greedy only")
        kwargs = {"prompt_lookup_num_tokens": self.lookup} if self.lookup else {}
        x = torch.tensor([list(prompt)])
        with counting_forward(self.model) as passes:
            start, cpu = time.perf_counter(), time.process_time()
            out = self.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens,
                                      do_sample=False, eos_token_id=eos_id, pad_token_id=eos_id, **kwargs)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        tokens = out[0, len(prompt):].tolist()
        stats = DecodeStats(self.lookup, iterations=passes[0], new_tokens=len(tokens), target_passes=passes[0],
                            time_total=seconds, cpu_total=cpu)
        return DecodeResult(tokens, [False] * len(tokens), stats)


def methods_for(model: torch.nn.Module, gamma: int) -> list[Method]:
    """The HF methods and ours, each of ours after the HF method of the same work (see PAIRS)."""
    return [HFGenerate("HF generate (greedy)", model),
            baseline(name="specdec autoregressive"),
            HFGenerate(f"HF generate prompt_lookup_num_tokens={gamma}", model, gamma),
            Decoding(f"specdec lookup:2:earliest (HF's rule), gamma={gamma}", PromptLookupDrafter(2, match="earliest"),
                     gamma),
            Decoding(f"specdec lookup (latest, n<=3), gamma={gamma}", PromptLookupDrafter(3, match="latest"), gamma)]


# each of ours is compared with the HF method of the same work: AR with greedy, lookup with lookup
PAIRS = {1: 0, 3: 2, 4: 2}


def versus(hf: list[Run], ours: list[Run]) -> str:
    """The harness's speedup of `ours` over `hf` with its 95% interval, as a table cell."""
    c = speedup(hf, ours)
    return f"{c.speedup:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}]"


def tokens_per_second(runs: list[Run]) -> float:
    return sum(r.tokens for r in runs) / sum(r.seconds for r in runs)


def speed_table(target, n: int, repeats: int, gamma: int) -> list[str]:
    """Per prompt and over all prompts: tokens/s (total tokens / total seconds over the
    repeats), forward passes, and the harness's speedup of ours over the HF counterpart."""
    eos = target.tokenizer.eos_token_id
    methods = methods_for(target.model, gamma)
    names = [m.name for m in methods]
    prompts = [target.tokenizer(text)["input_ids"] for text in PROMPTS.values()]
    runs = measure(methods, TargetScorer(target.model), prompts, n, GREEDY, repeats=repeats, eos_id=eos,
                   fuse_prefill=True, warm_up=n)
    rows = [f"| prompt | method | new tokens | target passes | tokens/s ({repeats} repeats) | "
            "speed vs HF counterpart: measured speedup [95% CI] | same output as HF greedy |",
            "|---|---|---|---|---|---|---|"]
    for j, label in enumerate(PROMPTS):
        mine = {m: [r for r in runs[m] if r.prompt == j] for m in names}
        ref = mine[names[0]][0].output
        for i, m in enumerate(names):
            first = mine[m][0]
            vs = versus(mine[names[PAIRS[i]]], mine[m]) if i in PAIRS else ""
            same = all(r.output == ref for r in mine[m])
            rows.append(f"| {label} | {m} | {first.tokens} | {first.stats.target_passes} | "
                        f"{tokens_per_second(mine[m]):.2f} | {vs} | {same} |")
    for i, m in enumerate(names):
        vs = versus(runs[names[PAIRS[i]]], runs[m]) if i in PAIRS else ""
        rows.append(f"| all prompts | {m} | {sum(r.tokens for r in runs[m]) // repeats} | | "
                    f"{tokens_per_second(runs[m]):.2f} | {vs} | |")
    return rows


def context_table(target, repeats: int, gamma: int, n: int = 32) -> list[str]:
    """Per context length: median ms per token and per-iteration time outside the target's pass
    (drafting and the loop's bookkeeping), over the harness's runs (prefill separate, excluded)."""
    text = Path(__file__).read_text() * 4  # plenty of varied tokens
    base = target.tokenizer(text)["input_ids"]
    contexts = (64, 1024)
    methods = [baseline(name="autoregressive"), Decoding(f"lookup gamma={gamma}", PromptLookupDrafter(3), gamma)]
    runs = measure(methods, TargetScorer(target.model), [base[:ctx] for ctx in contexts], n, GREEDY,
                   repeats=repeats, warm_up=4)
    rows = ["| context | method | ms / token (median) | overhead outside target pass, ms / iteration |",
            "|---|---|---|---|"]
    for j, ctx in enumerate(contexts):
        for m in methods:
            mine = [r for r in runs[m.name] if r.prompt == j]
            per_tok = statistics.median(r.seconds / r.tokens * 1e3 for r in mine)
            overhead = statistics.median((r.seconds - r.stats.time_verify) / r.stats.iterations * 1e3 for r in mine)
            rows.append(f"| {ctx} | {m.name} | {per_tok:.1f} | {overhead:.3f} |")
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
