"""A batched speculative decode on the default target, measured against the batch-aware plan.

B copies of each held-out prompt are decoded in lockstep, greedy, an n-gram drafting
gamma tokens: the copies accept identically, so one KV-cache crop serves every row (the
reference decoder's caches cannot crop rows by different counts; docs/engines.md). That checks
the cost side of `specdec.simulator.batch` end to end -- a pass over B x (gamma + 1) tokens in
place of B x 1 -- not ragged acceptance. Per batch size, plain batched greedy decoding and the
speculative decode run as two methods of the comparison harness (`Lockstep`; interleaved per
prompt, rotating order); the measured throughput speedup is the harness's speedup (seconds per
token, the prefill excluded, with its 95% interval), the predicted one E(gamma) t(B, 1) /
(t(B, gamma + 1) + o), with E(gamma) from this decode's own acceptance counts, t(B, k) timed by
`time_batched_passes` in the same run, and o the measured per-iteration drafting and loop time.

    python benchmarks/bench_batch.py --batch-sizes 1,4,16 --gamma 2 --prompts 8 --new-tokens 32
"""
from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

import numpy as np
import torch

from specdec.reference.core.loop import DecodeResult
from specdec.reference.core.stats import DecodeStats


@torch.inference_mode()
def lockstep(model, drafter, prompt: list[int], batch: int, new_tokens: int, gamma: int):
    """(seconds, tokens, accepted per position, reached per position, drafting seconds, iterations)."""
    from transformers import DynamicCache

    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.core.seams import NO_PASS, Verdict

    drafter.start(prompt)
    ids = torch.tensor([prompt] * batch, dtype=torch.long)
    cache = DynamicCache(config=model.config)
    model(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True, logits_to_keep=1)
    out, pending = [], int(prompt[-1])
    accepted, reached = np.zeros(max(gamma, 1), dtype=np.int64), np.zeros(max(gamma, 1), dtype=np.int64)
    draft_s, iterations = 0.0, 0
    start = time.perf_counter()
    while len(out) < new_tokens:
        t0 = time.perf_counter()
        draft = drafter.propose(gamma, SamplingConfig(0.0), None).tokens.tolist() if gamma else []
        draft_s += time.perf_counter() - t0
        x = torch.tensor([[pending] + draft] * batch, dtype=torch.long)
        logits = model(input_ids=x, past_key_values=cache, use_cache=True, logits_to_keep=len(draft) + 1).logits
        best = logits[0].argmax(-1).tolist()  # the rows are copies: row 0 decides for all
        n = 0
        while n < len(draft) and draft[n] == best[n]:
            n += 1
        reached[:min(n + 1, len(draft))] += 1
        accepted[:n] += 1
        if len(draft) > n:
            cache.crop(-(len(draft) - n))
        new = draft[:n] + [best[n]]
        t0 = time.perf_counter()
        drafter.commit(Verdict(n, torch.tensor(new), n == len(draft)), NO_PASS)
        draft_s += time.perf_counter() - t0
        out += new
        pending = new[-1]
        iterations += 1
    return time.perf_counter() - start, out[:new_tokens], len(out), accepted, reached, draft_s, iterations


@dataclass(frozen=True, eq=False)
class Lockstep:
    """B lockstep copies of a prompt decoded together (gamma 0: plain batched decoding), as a
    method of the comparison harness: the lockstep loop's time (prefill excluded), tokens and
    acceptance counts fill the run's DecodeStats."""

    name: str
    model: torch.nn.Module
    drafter: object
    batch: int
    gamma: int

    def decode(self, scorer, prompt, new_tokens, sampling, generator, eos_id, fuse_prefill) -> DecodeResult:
        seconds, out, n, accepted, reached, draft_s, iterations = lockstep(self.model, self.drafter, list(prompt),
                                                                           self.batch, new_tokens, self.gamma)
        stats = DecodeStats(len(accepted), iterations=iterations, new_tokens=n, time_total=seconds,
                            time_draft=draft_s, accepted=accepted.tolist(), reached=reached.tolist())
        return DecodeResult(out, [False] * len(out), stats)


class _Device:
    """The harness asks its scorer for a device only; the lockstep methods hold their model."""

    device = torch.device("cpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-sizes", default="1,4,16")
    ap.add_argument("--gamma", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=96)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--ngram", default=".cache/ngram/main/plain-2gram", help="the drafter (specdec ngram build)")
    args = ap.parse_args()
    from specdec.reference.core.models import load_model
    from specdec.reference.core.sampling import SamplingConfig
    from specdec.reference.data.prompts import held_out_prompts
    from specdec.reference.drafters.ngram import NgramDrafter
    from specdec.reference.estimate.batch_timing import time_batched_passes
    from specdec.reference.measure.harness import measure
    from specdec.reference.measure.speedup import speedup
    from specdec.simulator.batch import batch_plan

    sizes = [int(b) for b in args.batch_sizes.split(",")]
    target = load_model(None, backend="eager")
    model = target.model
    drafter = NgramDrafter(args.ngram, vocab_size=target.vocab_size)
    prompts, _ = held_out_prompts(args.prompts, args.prompt_tokens)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads; "
          f"{len(prompts)} held-out prompts x {args.new_tokens} tokens, n-gram {args.ngram} gamma {args.gamma}, greedy, "
          "B lockstep copies")
    print("| B | measured speedup [95% CI] | predicted | error | alpha_i (this decode) | "
          "t(B,1) ms | t(B,gamma+1) ms | outputs equal B=1 greedy |")
    print("|---|---|---|---|---|---|---|---|")
    for b in sizes:
        plain, spec = Lockstep("plain", model, drafter, b, 0), Lockstep("spec", model, drafter, b, args.gamma)
        runs = measure([plain, spec], _Device(), prompts, args.new_tokens, SamplingConfig(0.0), warm_up=4)
        comparison = speedup(runs["plain"], runs["spec"])
        acc = np.sum([r.stats.accepted for r in runs["spec"]], axis=0)
        rea = np.sum([r.stats.reached for r in runs["spec"]], axis=0)
        draft_s = sum(r.stats.time_draft for r in runs["spec"])
        iters = sum(r.stats.iterations for r in runs["spec"])
        same = all(a.output == s.output for a, s in zip(runs["plain"], runs["spec"]))
        timing = time_batched_passes(model, prompts[0] + prompts[1], [b], args.prompt_tokens + args.new_tokens // 2,
                                     args.gamma + 1, repeats=5)
        alphas = acc / np.maximum(rea, 1)
        overhead = draft_s / iters
        t = np.array(timing.seconds)
        t_spec = t.copy()
        t_spec[0, args.gamma] += overhead  # drafting and bookkeeping ride on each speculative iteration
        plan = batch_plan(alphas, [b], t_spec, 0.0, args.gamma)
        pred = float(plan.speedup[0, args.gamma])
        measured = comparison.speedup
        print(f"| {b} | {measured:.3f}x [{comparison.ci[0]:.3f}, {comparison.ci[1]:.3f}] | {pred:.3f}x | "
              f"{100 * (pred / measured - 1):+.1f}% | " + ", ".join(f"{x:.3f}" for x in alphas) + f" | "
              f"{1000 * t[0, 0]:.1f} | {1000 * t[0, args.gamma]:.1f} | {same} |")


if __name__ == "__main__":
    main()
