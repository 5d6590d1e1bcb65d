"""The replay at temperature > 0 against real sampled decodes, counts only (docs/estimator.md,
"Replay"): per workload, drafter and gamma, the expected iterations of a run of --new-tokens
tokens from the replay along the target's own samples (--samples per prompt), against the
mean over real speculative decodes of the same prompts (--decodes per prompt, their own
seeds); tokens per iteration = new tokens / iterations. Beside it the paper's i.i.d. model
(Eq. 1, the estimator's alpha; prompt lookup's alpha_when_proposed over its teacher-forced
proposal lengths; `budgeted_speedup` with c = 0 and v = 1, so its speedup is the tokens per
iteration). z = (predicted - decoded) mean iterations per run / the two standard errors
(for the i.i.d. model the decodes' alone). No timings: the counts do not depend on the
machine's speed. Usage:
    .venv/bin/python benchmarks/bench_replay.py --drafter eagle=eagle:DIR --drafter heads=heads:DIR \
        --drafter lookup=lookup [--workloads code,edit,chat] [--gammas 2,3] [--temperature 1]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from specdec.reference.core.loop import speculative_decode
from specdec.reference.model.models import load_model
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.model.target import TargetScorer
from specdec.reference.data.prompts import PromptSource, load_prompt_set
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.estimate.alpha import alpha_from_scores
from specdec.reference.estimate.replay import replay
from specdec.reference.estimate.samples import generate_continuations
from specdec.reference.estimate.teacher_forced import score_positions
from specdec.reference.validation.runs import drafter_gammas
from specdec.simulator.prediction import budgeted_speedup

MAX_GAMMA = 8


def iid_iterations(alpha, scores, gamma: int, n: int) -> float:
    """Iterations per run of n tokens under the i.i.d. model (v = 1, c = 0: tokens per iteration)."""
    unit = np.ones(MAX_GAMMA + 2)
    if alpha.alpha_when_proposed is not None and alpha.proposal_rate < 1:  # prompt lookup: its proposal lengths
        lengths = np.bincount(np.concatenate([s.block for s in scores]), minlength=MAX_GAMMA + 1).astype(float)
        return n / budgeted_speedup(alpha.alpha_when_proposed, gamma, n, 0.0, unit, lengths / lengths.sum())
    return n / budgeted_speedup(min(alpha.alpha, 1 - 1e-9), gamma, n, 0.0, unit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drafter", action="append", required=True, metavar="LABEL=SPEC")
    parser.add_argument("--workloads", default="code,edit,chat")
    parser.add_argument("--gammas", default="2,3")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--samples", type=int, default=2, help="target samples per prompt for the replay")
    parser.add_argument("--decodes", type=int, default=2, help="speculative decodes per prompt")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sampling, n = SamplingConfig(args.temperature), args.new_tokens
    target = load_model(None)
    drafters = {}
    for item in args.drafter:
        label, spec = item.split("=", 1)
        drafters[label] = make_drafter(spec, target, torch.device("cpu"))[0]
    gammas = [int(g) for g in args.gammas.split(",")]
    start = time.time()
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, backend {target.backend}, "
          f"T = {args.temperature:g}, {args.prompts} prompts x {n} tokens per workload: replay on {args.samples} "
          f"target samples per prompt, {args.decodes} decodes per prompt; {time.strftime('%Y-%m-%d')}\n")
    print("| workload | drafter | γ | decoded tokens/iteration | replay | z | i.i.d. model | z |")
    print("|---|---|---|---|---|---|---|---|")
    totals = {"replay": [], "iid": []}
    for workload in args.workloads.split(","):
        prompts = load_prompt_set(target.tokenizer, target.path, args.prompts, PromptSource(workloads=(workload,))).ids
        samples = generate_continuations(target.model, [p for p in prompts for _ in range(args.samples)], n, sampling,
                                         args.seed)
        for label, drafter in drafters.items():
            scorer = drafter.teacher_forced_scorer(target.model, MAX_GAMMA, None)
            scores = score_positions(target.model, scorer, samples, sampling, target.vocab_size, max_gamma=MAX_GAMMA)
            alpha = alpha_from_scores(scores, (1.0,), np.random.default_rng(0), 200, max_gamma=MAX_GAMMA)
            for gamma in drafter_gammas(drafter, gammas):
                replayed = np.array([replay([s.accept()], [s.block], gamma, MAX_GAMMA)[0].iterations for s in scores])
                g = torch.Generator().manual_seed(args.seed + 1000 * gamma)
                decoded = np.array([speculative_decode(TargetScorer(target.model), drafter, p, n, gamma, sampling,
                                                       g).stats.iterations
                                    for p in prompts for _ in range(args.decodes)], dtype=float)
                se_dec = decoded.std(ddof=1) / np.sqrt(decoded.size)
                se = np.hypot(replayed.std(ddof=1) / np.sqrt(replayed.size), se_dec)
                iid = iid_iterations(alpha, scores, gamma, n)
                z_replay, z_iid = (replayed.mean() - decoded.mean()) / se, (iid - decoded.mean()) / se_dec
                totals["replay"].append(abs(z_replay))
                totals["iid"].append(abs(z_iid))
                print(f"| {workload} | {label} | {gamma} | {n / decoded.mean():.3f} | {n / replayed.mean():.3f} | "
                      f"{z_replay:+.1f} | {n / iid:.3f} | {z_iid:+.1f} |", flush=True)
    within = {k: sum(z <= 1.96 for z in v) for k, v in totals.items()}
    print(f"\n|z| <= 1.96: replay {within['replay']}/{len(totals['replay'])}, i.i.d. model "
          f"{within['iid']}/{len(totals['iid'])}; mean |z| replay {np.mean(totals['replay']):.2f}, i.i.d. "
          f"{np.mean(totals['iid']):.2f}; {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
