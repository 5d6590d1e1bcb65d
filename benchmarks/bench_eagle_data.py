"""How much the feature draft (and the heads) gain from more of the target's own in-domain text:
each configuration trains both drafters from nothing on the same data options through the CLI
(`specdec heads train`, `specdec eagle train`; the target's answers and passes cached per data
configuration, so the second trainee reads them back), then measures alpha at temperature 0 on
the held-out prompts of each workload with `specdec estimate` (chat template, teacher-forced,
no timings), and prints per workload alpha, alpha_1 and the tokens per target pass of the greedy
replay at gamma 3 (what the issue's bar is stated in), with the training seconds from the cards.

Usage (about 10 minutes per 6,000 answer tokens on 2 CPU cores; take the CPU lock):
    .venv/bin/python benchmarks/bench_eagle_data.py --out /tmp/eagle-data \
        --configs 6000:49152:4,24000:49152:4,24000:49152:8 [--workloads code,edit,chat] [--alpha-tokens 384] \
        [--fuse-layers eagle3] [--draft-layers 2]
A configuration is ANSWER_TOKENS:TOTAL_TOKENS:EAGLE_EPOCHS[:CODE_TOKENS] (CODE_TOKENS of Python
source, `--code-tokens`, default 0; the heads always train their default 4 epochs, once per data
configuration).
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

SPECDEC = [sys.executable, "-m", "specdec"]
GAMMA = 3


def run_json(args: list[str]) -> dict:
    """One specdec command's --json answer (its progress on stderr passes through)."""
    out = subprocess.run(SPECDEC + args + ["--json"], check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def train(kind: str, folder: Path, answers: int, total: int, code: int, extra: list[str]) -> dict:
    card = folder / "card.json"
    if card.is_file():
        return json.loads(card.read_text())
    return run_json([kind, "train", "--tokens", str(total), "--aligned-tokens", str(answers), "--code-tokens",
                     str(code), "--sampled-from", "workloads", "--out", str(folder), *extra])


def alphas(spec: str, workloads: str, tokens: int) -> dict[str, dict]:
    """Per workload: alpha, alpha_1, tokens per pass at GAMMA (greedy replay) at T = 0."""
    report = run_json(["estimate", "--drafter", spec, "--workload", workloads, "--tokens", str(tokens),
                       "--new-tokens", "64", "--no-timing", "--max-k", str(GAMMA + 1)])
    rows = {}
    for category, r in report["categories"].items():
        replay = r.get("replay", {}).get(str(GAMMA), {})
        per_position = replay.get("alpha_per_position") or r.get("alpha_per_position") or [None]
        rows[category] = {"alpha": r["alpha"], "alpha_ci": r["alpha_ci"], "alpha_1": per_position[0],
                          "tokens_per_pass": replay.get("tokens_per_iteration")}
    return rows


def fmt(x, spec: str = ".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the trained drafters and results.json")
    parser.add_argument("--configs", default="6000:49152:4,24000:49152:4,24000:49152:8")
    parser.add_argument("--workloads", default="code,edit,chat")
    parser.add_argument("--alpha-tokens", type=int, default=384)
    parser.add_argument("--fuse-layers", default="", help="the feature draft's --fuse-layers (EAGLE-3's fusion)")
    parser.add_argument("--draft-layers", type=int, default=1, help="the feature draft's decoder layers")
    args = parser.parse_args()
    shape = ["--fuse-layers", args.fuse_layers] if args.fuse_layers else []  # the feature draft's own options
    shape += ["--draft-layers", str(args.draft_layers)] if args.draft_layers != 1 else []
    tag = f"-f{args.fuse_layers.replace(',', '_')}" if args.fuse_layers else ""
    tag += f"-l{args.draft_layers}" if args.draft_layers != 1 else ""
    configs = [(*(int(v) for v in c.split(":")), 0)[:4] for c in args.configs.split(",")]
    print(f"# {platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    results = []
    for answers, total, epochs, code in configs:
        data = f"a{answers}-t{total}" + (f"-c{code}" if code else "")
        lap = time.perf_counter()
        heads = train("heads", args.out / f"heads-{data}", answers, total, code, ["--heads", "3"])
        eagle_dir = args.out / f"eagle-{data}-e{epochs}{tag}"
        eagle = train("eagle", eagle_dir, answers, total, code, ["--epochs", str(epochs), *shape])
        trained = time.perf_counter() - lap
        for name, card, folder in (("heads", heads, args.out / f"heads-{data}"),
                                   ("eagle", eagle, eagle_dir)):
            if name == "heads" and any(r["drafter"] == "heads" and r["data"] == data for r in results):
                continue  # one heads build per data configuration
            held = card["held_out"]
            results.append({"drafter": name, "data": data, "answers": answers, "total": total, "code": code,
                            "epochs": epochs if name == "eagle" else card.get("epochs", 4),
                            "held_out_top1": [h["top1"] for h in held], "seconds": card["seconds"],
                            "alpha": alphas(f"{name}:{folder}", args.workloads, args.alpha_tokens)})
        print(f"# {data}, eagle epochs {epochs}: trained in {trained:.0f} s (0 if cached)", flush=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
    cats = args.workloads.split(",")
    print("\n| drafter | answer / code / total tokens | epochs | held-out top-1 by depth | train s | "
          + " | ".join(f"{c} alpha [alpha_1, tokens/pass g={GAMMA}]" for c in cats) + " |")
    print("|---|---|---|---|---|" + "---|" * len(cats))
    for r in results:
        cells = [f"{fmt(r['alpha'][c]['alpha'])} [{fmt(r['alpha'][c]['alpha_1'])}, "
                 f"{fmt(r['alpha'][c]['tokens_per_pass'], '.2f')}]" for c in cats]
        print(f"| {r['drafter']} | {r['answers']:,} / {r.get('code', 0):,} / {r['total']:,} | {r['epochs']} | "
              + " ".join(f"{t:.3f}" for t in r["held_out_top1"]) + f" | {r['seconds']['train']:.0f} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
