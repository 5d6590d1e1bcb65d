"""The estimator's tree replay against real tree decodes on the default target: per workload and γ,
speculative decodes of --prompts prompts (--new-tokens each) with a tree drafter, and the drafter's
trees teacher-forced along the decoded text (`estimate.tree_walk`) and replayed. At T = 0 the text is
the target's greedy continuation (the estimator's samples; each decode checked to emit it); at T > 0
each decode's own sampled output (prompt j's generator seeded j), along which a deterministic tree's
acceptance is fixed. Prints tokens per iteration and nodes verified per iteration both ways, and how
many runs' iteration and node counts are identical (float rounding of the one-pass features against
the incremental passes may move a tree's top-k where two candidates tie; a fault would part many).

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/check_tree_replay.py \
        --drafter eagle:.cache/eagle/main,tree=6,topk=2 [--workloads code,edit,chat] [--gammas 2,3,4]
    (or --drafter heads:.cache/heads/main,k=3,p=2: a heads lattice)
"""
from __future__ import annotations

import argparse
import platform
import time

import torch

from specdec.reference.core.loop import speculative_decode
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.data.prompts import PromptSource, load_prompt_set
from specdec.reference.drafters.factory import make_drafter
from specdec.reference.estimate.replay import replay
from specdec.reference.estimate.samples import TargetSamples, generate_continuations
from specdec.reference.estimate.teacher_forced import score_positions
from specdec.reference.model.models import load_model
from specdec.reference.model.target import TargetScorer

GREEDY = SamplingConfig(0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drafter", required=True, help="a tree drafter: eagle:DIR,tree=N,topk=K or heads:DIR,k=K,p=P")
    parser.add_argument("--workloads", default="code,edit,chat")
    parser.add_argument("--gammas", default="2,3,4")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    args = parser.parse_args()
    sampling = SamplingConfig(args.temperature)
    gammas = [int(g) for g in args.gammas.split(",")]
    target = load_model(None, backend="auto")
    drafter = make_drafter(args.drafter, target)[0]
    if not drafter.tree:
        raise SystemExit(f"--drafter {args.drafter}: not a tree drafter")
    width = max(gammas)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, backend {target.backend}, "
          f"{args.drafter}, T = {args.temperature:g}, {args.prompts} prompts x {args.new_tokens} tokens per workload; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| workload | γ | decoded tokens/iteration | replayed | nodes/iteration decoded | replayed | "
          "runs with equal iterations and nodes |")
    print("|---|---|---|---|---|---|---|")
    for workload in args.workloads.split(","):
        prompts = load_prompt_set(target.tokenizer, target.path, args.prompts, PromptSource(workloads=(workload,))).ids
        greedy = generate_continuations(target.model, prompts, args.new_tokens, GREEDY, None) if sampling.greedy \
            else None
        for gamma in gammas:
            runs = []
            for j, prompt in enumerate(prompts):
                generator = None if sampling.greedy else torch.Generator().manual_seed(j)
                result = speculative_decode(TargetScorer(target.model), drafter, prompt, args.new_tokens, gamma,
                                            sampling, generator)
                if greedy is not None and result.tokens != greedy.continuations[j]:
                    raise SystemExit(f"{workload}: a greedy tree decode left the target's greedy text")
                runs.append(result)
            if not sampling.greedy or gamma == gammas[0]:  # greedy: every γ decodes the same text
                samples = TargetSamples([list(p) for p in prompts], [r.tokens for r in runs], sampling)
                scores = score_positions(target.model, drafter.teacher_forced_scorer(target.model, width, None),
                                         samples, sampling, target.vocab_size, max_gamma=width)
            equal, decoded_iterations, replayed_iterations, decoded_nodes, replayed_nodes = 0, 0.0, 0.0, 0.0, 0.0
            for result, s in zip(runs, scores):
                replayed, _ = replay([s.accept()], [s.block], gamma, width, [s.nodes])
                equal += (result.stats.iterations, result.stats.verified) == (replayed.iterations, replayed.verified)
                decoded_iterations += result.stats.iterations
                replayed_iterations += replayed.iterations
                decoded_nodes += result.stats.verified
                replayed_nodes += replayed.verified
            n = args.new_tokens * len(prompts)
            print(f"| {workload} | {gamma} | {n / decoded_iterations:.3f} | {n / replayed_iterations:.3f} | "
                  f"{decoded_nodes / decoded_iterations:.2f} | {replayed_nodes / replayed_iterations:.2f} | "
                  f"{equal}/{len(prompts)} |", flush=True)


if __name__ == "__main__":
    main()
