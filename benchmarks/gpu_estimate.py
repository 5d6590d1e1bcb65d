"""`specdec estimate --batch-sizes` on a GPU, end to end (issue 54): a random-weight Hugging Face
Llama of a real shape (benchmarks/data/shapes/), saved with a word-level tokenizer, timed by the
command line as a user runs it (on CUDA it takes the captured static decoder,
`reference/estimate/batch_timing.py`), beside the same cells timed directly by `time_step` —
the two should agree within the timing's own spread.

    GPU_SCRIPT=gpu_estimate.py bash benchmarks/gpu_check.sh "$OUT" [--shape llama-3.2-1b]
    python benchmarks/gpu_estimate.py --out DIR --shape tiny --device cpu   (the CPU test)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

SHAPES = Path(__file__).resolve().parent / "data" / "shapes"


def save_random_model(shape: str, folder: Path, device: str) -> None:
    """The shape's config with random weights (bf16 on CUDA, fp32 elsewhere) and a word-level
    tokenizer over its vocabulary, as a folder `estimate --target` loads."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(**json.loads((SHAPES / f"{shape}.json").read_text()))
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    vocab = {"<unk>": 0, "</s>": 1, **{f"w{i}": i + 2 for i in range(config.vocab_size - 2)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>").save_pretrained(folder)


def direct_table(folder: Path, device: str, batch_sizes: list[int], max_k: int, context: int) -> list[list[float]]:
    """The same cells through `time_batched_captured`'s own pieces, called directly."""
    from transformers import AutoModelForCausalLM

    from specdec.reference.estimate.batch_timing import time_captured_passes

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device)
    return time_captured_passes(model, batch_sizes, context, max_k).seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shape", default="llama-3.2-1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-sizes", default="1,4,16")
    parser.add_argument("--max-k", type=int, default=8)
    parser.add_argument("--context", type=int, default=512)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    folder = args.out / "model"
    start = time.perf_counter()
    save_random_model(args.shape, folder, args.device)
    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    prompts = args.out / "prompts.txt"  # no corpus on a bare device machine: words of the tokenizer
    prompts.write_text("\n".join(" ".join(f"w{(7 * i + j) % 200}" for j in range(40)) for i in range(4)) + "\n")
    argv = ["estimate", "--target", str(folder), "--prompts-file", str(prompts), "--drafter", "none", "--batch-sizes", args.batch_sizes,
            "--max-k", str(args.max_k), "--context", str(args.context), "--device", args.device, "--dtype", dtype,
            "--json"]
    done = subprocess.run([sys.executable, "-c", "from specdec.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=900, cwd=args.out)  # not the checkout: its specdec/ would shadow the install
    (args.out / "estimate.stderr").write_text(done.stderr)
    if done.returncode != 0:
        sys.exit(f"specdec estimate exited {done.returncode}: {done.stderr.strip()[-500:]}")
    report = json.loads(done.stdout)
    timing = report["batch_timing"]
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    direct = direct_table(folder, args.device, sizes, args.max_k, args.context)
    ratio = [[e / d for e, d in zip(er, dr)] for er, dr in zip(timing["seconds"], direct)]
    result = {"shape": args.shape, "device": args.device, "command": "specdec " + " ".join(argv),
              "estimate": timing, "direct_seconds": direct, "ratio": ratio,
              "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
              "torch": torch.__version__, "wall_seconds": time.perf_counter() - start}
    (args.out / "gpu-estimate.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# specdec estimate --batch-sizes on {result['gpu'] or args.device} ({args.shape}, L = {args.context})",
             "", f"estimate's table: {timing.get('device')} ({timing.get('layout', '')}); ms, estimate / direct:", "",
             "| B | " + " | ".join(f"k={k}" for k in range(1, args.max_k + 1)) + " |", "|---|" + "---|" * args.max_k]
    for b, er, rr in zip(sizes, timing["seconds"], ratio):
        lines.append(f"| {b} | " + " | ".join(f"{1000 * e:.3f} ({r:.2f})" for e, r in zip(er, rr)) + " |")
    (args.out / "gpu-estimate.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
