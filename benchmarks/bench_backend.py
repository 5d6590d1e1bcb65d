"""Target backends side by side (issues 12, 26): t(1) and v(k), k = 1..16, for several backend
configurations in one run, next to the hardware's floor (STREAM bandwidth and fp32 FLOP rate;
specdec.reference.estimate.limits).

Configurations (`--configs`, comma-separated): `eager`, `fast` (every part of the fast backend),
or parts joined by "+" (`linear`, `linear+attention`, `linear+mlp`, `linear+norm`, ...: which of
the model's parts the fast backend replaces, specdec.reference.model.fast_modules.PARTS), so each
part's effect is measured paired against the others. `--tiling avx2` builds the fast
configurations on the 8-float (AVX2) tiling even on an AVX-512 CPU. All load the same fp32 weights; each
repeat times every k once for every configuration, the order rotating per repeat, so the
machine's drift hits all alike; medians over repeats; each configuration's t(1) against the
first's is the median of the per-repeat ratios. Also decodes with the autoregressive baseline
and prompt lookup (gamma 1..4) on the first and the last configuration to show the end-to-end
effect (and the main job's plain 4-gram at gamma 1, 2 when it is built): per configuration, the
same method on each backend is a harness method with its own scorer
(`specdec.reference.measure.harness.Decoding(scorer=...)`), the two run interleaved 3 times, and
"last vs first" is the harness's measured speedup (`specdec.reference.measure.speedup.speedup`:
seconds per token, prefill excluded, 95% bootstrap interval over the paired runs). Usage:
    .venv/bin/python benchmarks/bench_backend.py [--context 72] [--repeats 9] [--new-tokens 48]
        [--configs eager,fast] [--tiling native|avx2]

Then where the last configuration's pass goes: every call of the kernel's products (`small_linear`,
`small_glu`) timed inside passes over k = 1, 5, 8, 16 tokens, the rest of the pass the difference.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from specdec import paths as PATHS
from specdec.reference.model.backend import use_backend
from specdec.reference.model.fast_modules import PARTS
from specdec.reference.model.kernel_build import kernel
from specdec.reference.model.models import LoadedModel, load_model
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.drafters.ngram import NgramDrafter
from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
from specdec.reference.drafters.protocol import Drafter, NoDrafter
from specdec.reference.estimate.limits import measure_limits
from specdec.reference.model.seq2seq import new_cache, run_model, with_cache
from specdec.reference.estimate.timing import context_of, pool_timings, time_target_passes
from specdec.reference.measure.harness import Decoding, measure
from specdec.reference.measure.speedup import speedup

PROMPT = ("Rewrite the following paragraph in the past tense.\n\nThe cat sits on the mat. It watches the birds in "
          "the garden and waits for the sun to set. Then it walks to the kitchen, where the old woman gives it a "
          "bowl of milk.\n\nPast tense:\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--context", type=int, default=72)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--configs", default="eager,fast")
    parser.add_argument("--tiling", default="native", choices=("native", "avx2"))
    args = parser.parse_args()
    names = args.configs.split(",")
    wrong = [p for name in names if name not in ("eager", "fast") for p in name.split("+") if p not in PARTS]
    if wrong:
        raise SystemExit(f"--configs: {wrong[0]!r} is not eager, fast or a part ({', '.join(PARTS)})")
    models = {name: configured(name, args.tiling) for name in names}
    tokens = models[names[0]].tokenizer(PROMPT)["input_ids"]
    runs = {name: [] for name in models}
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            runs[name].append(time_target_passes(models[name].model, tokens, args.context, 16, repeats=1, warmup=1))
    pooled = {name: pool_timings(t) for name, t in runs.items()}
    limits = measure_limits(models[names[0]].model)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch "
          f"{torch.__version__}, kernel tiling {args.tiling} ({kernel(args.tiling).lanes()} floats per vector); "
          f"context {args.context} tokens, {args.repeats} paired repeats, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"floor: {limits.weight_bytes / 1e6:.0f} MB at {limits.bandwidth / 1e9:.1f} GB/s (triad), "
          f"{limits.flops / 1e9:.0f} GFLOP/s fp32\n")
    print("| k | " + " | ".join(str(k) for k in range(1, 17)) + " |")
    print("|---|" + "---|" * 16)
    for name, t in pooled.items():
        print(f"| {name} t(k) ms | " + " | ".join(f"{1000 * s:.1f}" for s in t.seconds) + " |")
    for name, t in pooled.items():
        print(f"| {name} v(k) | " + " | ".join(f"{v:.2f}" for v in t.verify_cost) + " |")
    print("| floor ms | " + " | ".join(f"{1000 * limits.min_seconds(k):.1f}" for k in range(1, 17)) + " |\n")
    for name in names[1:]:
        ratios = [[b.seconds[k] / a.seconds[k] for a, b in zip(runs[names[0]], runs[name])] for k in (0, 4, 15)]
        print(f"{name} / {names[0]} (median of paired repeats): t(1) {statistics.median(ratios[0]):.3f}, "
              f"t(5) {statistics.median(ratios[1]):.3f}, t(16) {statistics.median(ratios[2]):.3f}")
    last = names[-1]
    print(f"\n| k | {last} pass ms | matrix products ms | everything else ms |\n|---|---|---|---|")
    for k, (whole, products) in breakdown(models[last].model, tokens, args.context, args.repeats, args.tiling).items():
        print(f"| {k} | {1000 * whole:.1f} | {1000 * products:.1f} | {1000 * (whole - products):.1f} |")
    first = names[0]
    print(f"\n| decode (greedy, {args.new_tokens} tokens) | {first} s | {last} s | {last} vs {first}: measured speedup "
          "[95% CI] | same tokens |\n|---|---|---|---|---|")
    configs = [("autoregressive", 0, None)] + [(f"lookup gamma={g}", g, None) for g in (1, 2, 3, 4)]
    ngram = PATHS.cache_dir() / "ngram" / "main" / "plain-4gram"  # built by the main job
    if ngram.is_dir():
        configs += [(f"4-gram gamma={g}", g, ngram) for g in (1, 2)]
    for label, gamma, ngram_path in configs:
        methods = [Decoding(name, drafter(models[name], gamma, ngram_path), gamma, scorer=TargetScorer(models[name].model))
                   for name in (first, last)]
        runs = measure(methods, methods[0].scorer, [tokens], args.new_tokens, SamplingConfig(0.0), repeats=3)
        c = speedup(runs[first], runs[last])
        e, f = (statistics.median(r.seconds for r in runs[name]) for name in (first, last))
        same = all(a.output == b.output for a, b in zip(runs[first], runs[last]))
        print(f"| {label} | {e:.2f} | {f:.2f} | {c.speedup:.2f} [{c.ci[0]:.2f}, {c.ci[1]:.2f}] | {same} |")


def configured(name: str, tiling: str) -> LoadedModel:
    """The default target on the configuration `name`: eager, fast (every part) or parts joined by "+"."""
    loaded = load_model(None, backend="eager")
    parts = () if name == "eager" else PARTS if name == "fast" else tuple(name.split("+"))
    if parts:
        use_backend(loaded.model, "fast", parts, tiling)
    return loaded


@contextmanager
def timed_products(seconds: list[float], tiling: str):
    """Every call of the kernel's products (small_linear, small_glu) adds its seconds to seconds[0] while inside."""
    ops = kernel(tiling)
    originals = {name: getattr(ops, name) for name in ("small_linear", "small_glu")}

    def timed(f):
        def call(*args):
            start = time.perf_counter()
            y = f(*args)
            seconds[0] += time.perf_counter() - start
            return y
        return call

    for name, f in originals.items():
        setattr(ops, name, timed(f))
    try:
        yield
    finally:
        for name, f in originals.items():
            setattr(ops, name, f)


@torch.inference_mode()
def breakdown(model: torch.nn.Module, tokens: list[int], context: int, repeats: int, tiling: str,
              ks: tuple[int, ...] = (1, 5, 8, 16)) -> dict[int, tuple[float, float]]:
    """{k: (median pass seconds, median seconds in the kernel's products)} over passes at `context` tokens."""
    ids = torch.tensor([context_of(tokens, context + max(ks))])
    cache = new_cache(model)
    run_model(model, ids[:, :context], None, 1, **with_cache(model, cache))
    runs: dict[int, list[tuple[float, float]]] = {k: [] for k in ks}
    for r in range(repeats + 1):  # the first round warms up
        for k in ks:
            products = [0.0]
            with timed_products(products, tiling):
                start = time.perf_counter()
                run_model(model, ids[:, context:context + k], None, k, **with_cache(model, cache))
                whole = time.perf_counter() - start
            cache.crop(-k)
            if r:
                runs[k].append((whole, products[0]))
    return {k: (statistics.median(w for w, _ in v), statistics.median(p for _, p in v)) for k, v in runs.items()}


def drafter(model: LoadedModel, gamma: int, ngram: Path | None) -> Drafter:
    """The decode table's drafter: none at gamma 0, else prompt lookup or the n-gram at `ngram`."""
    if gamma == 0:
        return NoDrafter()
    return PromptLookupDrafter(3) if ngram is None else NgramDrafter(ngram, model.vocab_size)

if __name__ == "__main__":
    main()
