"""Issue 52: how confident a draft is right after its own rejected token, against its confidence on the
target's sequence, by a plain forward over each prefix (the finding that made the estimator score it,
`reference/estimate/past_rejection.py`, docs/theory.md "Past a rejection"; its one-pass branches give the same
111 cases on this command). Greedy (t = 0), a `model:` draft, a workload's held-out prompts:

    python benchmarks/bench_past_rejection.py --draft .cache/drafts/d2 --workload code --prompts 10 --new-tokens 24
"""
from __future__ import annotations

import argparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from specdec.paths import default_target_dir
from specdec.reference.core.sampling import SamplingConfig
from specdec.reference.data.prompts import encode_prompt
from specdec.reference.data.workloads import workload_prompts
from specdec.reference.estimate.samples import generate_batch


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draft", required=True, help="a draft model folder (specdec draft train)")
    parser.add_argument("--workload", default="code")
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--new-tokens", type=int, default=24)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(default_target_dir())
    target = AutoModelForCausalLM.from_pretrained(default_target_dir(), dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(args.draft, dtype=torch.float32).eval()
    on_sequence, past_rejection = [], []
    for prompt in workload_prompts(args.workload, args.prompts):
        ids, _ = encode_prompt(tokenizer, prompt, "auto", 2048, "refuse")
        answer = generate_batch(target, [ids], args.new_tokens, SamplingConfig(temperature=0.0), None)[0]
        sequence, n = ids + answer, len(ids)
        q = torch.softmax(draft(torch.tensor([sequence])).logits[0].float(), -1)
        for j in range(args.new_tokens):
            confidence, token = q[n + j - 1].max(-1)
            on_sequence.append(confidence.item())
            if token.item() != sequence[n + j]:  # rejected at t = 0: the draft's next step after its own token
                after = draft(torch.tensor([sequence[:n + j] + [token.item()]])).logits[0, -1].float()
                past_rejection.append(torch.softmax(after, -1).max().item())
    on, past = torch.tensor(on_sequence), torch.tensor(past_rejection)
    print(f"{args.draft} on {args.workload}, {args.prompts} prompts x {args.new_tokens} greedy target tokens")
    for tau in (0.3, 0.5, 0.7, 0.9):
        print(f"P(confidence >= {tau}): on the target's sequence {(on >= tau).float().mean():.3f} ({len(on)} "
              f"positions), right after its own rejected token {(past >= tau).float().mean():.3f} ({len(past)})")
    print(f"mean confidence: on the sequence {on.mean():.3f}, after a rejected token {past.mean():.3f}")


if __name__ == "__main__":
    main()
