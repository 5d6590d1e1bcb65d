"""A batched draft step's output layer: on each slot's last fed position (`BatchScorer.next_logits`,
what `NeuralSlots` drafts with) against on every fed position and the last ones picked (before
2026-11-27), paired in one process, for a draft of the default target's shapes (576 wide, the
49,152-token vocabulary, 2 layers, random weights: the cost, not the output, is measured).
A slot feeds m = 2 tokens after a wholly accepted draft (the catch-up), m = 1 otherwise.

    flock /tmp/specdec-heavy.lock .venv/bin/python benchmarks/bench_draft_step.py [--repeats 25]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from specdec.reference.core.seams import NOTHING
from specdec.reference.model.batch_scorer import BatchScorer

CONTEXT = 128


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--batch-sizes", default="1,4,16")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                         num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval()
    g = torch.Generator().manual_seed(0)
    print("B   m   all positions   last only   ratio   (medians, ms)")
    with torch.inference_mode():
        for B in [int(x) for x in a.batch_sizes.split(",")]:
            scorer = BatchScorer(model, B, 512)
            for slot in range(B):
                scorer.start(slot, torch.randint(0, 49152, (CONTEXT,), generator=g).tolist())
            times: dict[tuple[int, str], list[float]] = {}
            for _ in range(a.repeats):
                for m in (1, 2):
                    out = {}
                    for way in ("all", "last"):
                        for slot in range(B):
                            scorer.append(slot, [5] * (m - 1))  # the pending token and m - 1 more
                        start = time.perf_counter()
                        if way == "last":
                            out[way] = scorer.next_logits(range(B))
                        else:
                            logits, _, _, counts = scorer._feed(range(B), NOTHING)
                            out[way] = logits[torch.tensor(counts).cumsum(0) - 1]
                        times.setdefault((m, way), []).append(time.perf_counter() - start)
                        for slot in range(B):
                            scorer.rewind(slot, CONTEXT)
                    torch.testing.assert_close(out["all"], out["last"])
            for m in (1, 2):
                full, last = (1e3 * float(np.median(times[m, w])) for w in ("all", "last"))
                print(f"{B:<4}{m:<4}{full:>13.2f}{last:>12.2f}{last / full:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
