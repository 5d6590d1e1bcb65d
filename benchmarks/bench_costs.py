"""Target pass costs on any device, in one file both planners read: the verify-cost curve t(k),
v(k) (B = 1), t(B, k) per batch size, and verify steps on draft trees of N nodes.

    python benchmarks/bench_costs.py --device cuda --out costs.json
    python benchmarks/bench_costs.py --device cuda --config-only --out costs.json

--config-only builds the target from its config.json with random weights: a dense
transformer's pass time does not depend on the values of its weights, so a machine without
the weights (a GPU machine the weights cannot reach) still measures the right costs.

The output has `verify_cost` and `cost.target_step_seconds` (`specdec plan-trees
--verify-cost-file`, `specdec plan --verify-cost-file`), `batch_timing` (`specdec plan
--batch-cost-file`) and `verify_step_ms` (tree verify steps, N draft nodes).
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=Path, default=None, help="model folder (default: the embedded SmolLM2)")
    ap.add_argument("--config-only", action="store_true", help="random weights from the folder's config.json")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--max-k", type=int, default=16)
    ap.add_argument("--batch-sizes", default="1,2,4,8,16,32,64")
    ap.add_argument("--batch-max-k", type=int, default=8)
    ap.add_argument("--tree-sizes", default="0,1,2,3,5,8,12,16,24,32")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from specdec.costfiles import KIND_TREE_COSTS
    from specdec.reference.estimate.batch_timing import time_batched_passes
    from specdec.reference.estimate.timing import time_target_passes
    from specdec.reference.heads.tree_plan import verify_step_seconds

    dtype = getattr(torch, args.dtype)
    if args.target is None:
        from specdec.reference.data.default_model import default_target_path
        args.target = default_target_path()
    if args.config_only:
        from transformers import AutoConfig, AutoModelForCausalLM
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(args.target), dtype=dtype)
    else:
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(args.target, dtype=dtype)
    model = model.to(args.device).eval()
    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (args.context + 256,), generator=torch.Generator().manual_seed(0)).tolist()
    start = time.perf_counter()
    timing = time_target_passes(model, tokens, args.context, args.max_k, args.repeats)
    batch = time_batched_passes(model, tokens, [int(b) for b in args.batch_sizes.split(",")], args.context,
                                args.batch_max_k, args.repeats)
    sizes = [int(n) for n in args.tree_sizes.split(",")]
    steps = verify_step_seconds(model, tokens[:args.context], sizes, depth=3, repeats=args.repeats)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or platform.machine()
    report = {"kind": KIND_TREE_COSTS,
              "device": args.device, "device_name": name, "dtype": args.dtype, "config_only": args.config_only,
              "target": str(args.target), "torch": torch.__version__, "seconds": time.perf_counter() - start,
              "verify_cost": timing.verify_cost, "cost": {"target_step_seconds": timing.step_seconds,
                                                          "verify_seconds": timing.seconds, "spread": timing.spread},
              "batch_timing": batch.to_dict(), "verify_step_ms": {str(n): 1000 * s for n, s in steps.items()}}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{name} {args.dtype}: t(1) {1000 * timing.step_seconds:.2f} ms; v(k) "
          + " ".join(f"{v:.2f}" for v in timing.verify_cost))
    print("t(B, k) ms:")
    for b, row in zip(batch.batch_sizes, batch.seconds):
        print(f"  B={b:<3d} " + " ".join(f"{1000 * s:7.2f}" for s in row))
    print("tree verify step ms by nodes: " + " ".join(f"{n}:{1000 * s:.2f}" for n, s in steps.items()))


if __name__ == "__main__":
    main()
