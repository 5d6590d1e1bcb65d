"""Benchmark: the alpha estimator, the cost estimates and the predicted-vs-measured validation on
the default target (SmolLM2-135M-Instruct, CPU), at larger sizes than the main job, and the
main job itself timed end to end.

    .venv/bin/python benchmarks/bench_validation.py [--out DIR] [--alpha-tokens 10000] [--alpha-new-tokens 128]
        [--gammas 1,2,4,8] [--prompts 12] [--new-tokens 16] [--repeats 1] [--main-job]

1. `specdec validate` with the n-gram drafters of the main job (built by it, or here with
   `specdec ngram build` if absent) and prompt lookup, temperatures 0 and 1; alpha from
   --alpha-tokens target-sampled positions per temperature (10,000 as in the paper's
   Table 3). Writes validation.json / .md and the figures into --out.
2. With --main-job: removes the main job's n-gram models and its aligned corpus (so they
   are rebuilt as on a fresh machine; set-up itself is already done here) and times
   `bash scripts/main_job.sh --out DIR/main-job` end to end.

Every step is a subprocess of the real commands. Run it alone on the machine (timings taken
next to another heavy job are worthless): `flock /tmp/specdec-cpu.lock .venv/bin/python
benchmarks/bench_validation.py`. Prints a short summary; the tables are in DIR.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPECDEC = REPO / ".venv" / "bin" / "specdec"
NGRAM = REPO / ".cache" / "ngram" / "main"
MAIN_ALIGNED_TOKENS = 16000  # the aligned 4-gram of this n-gram study (target-sampled tokens)


def ensure_models() -> dict[str, Path]:
    """The main job's three n-gram drafters, built with the CLI if absent."""
    specs = {"plain-2gram": ["--order", "2", "--corpus", "plain"],
             "plain-4gram": ["--order", "4", "--corpus", "plain"],
             "aligned-4gram": ["--order", "4", "--corpus", "aligned", "--aligned-tokens", str(MAIN_ALIGNED_TOKENS)]}
    for name, args in specs.items():
        if not (NGRAM / name / "model.json").is_file():
            subprocess.run([str(SPECDEC), "ngram", "build", *args, "--out", str(NGRAM / name)], check=True)
    return {name: NGRAM / name for name in specs}


def aligned_corpus_dir() -> Path | None:
    """The cached aligned corpus the main job's aligned 4-gram was trained on (from its model.json)."""
    meta = NGRAM / "aligned-4gram" / "model.json"
    if not meta.is_file():
        return None
    path = json.loads(meta.read_text()).get("extra", {}).get("aligned", {}).get("path")
    return Path(path).parent if path else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out-validation")
    parser.add_argument("--alpha-tokens", type=int, default=10_000)
    parser.add_argument("--alpha-new-tokens", type=int, default=128,
                        help="continuation length for the estimator (10,000 / 128 = 79 of the 95 held-out prompts)")
    parser.add_argument("--gammas", default="1,2,4,8")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--main-job", action="store_true", help="also time scripts/main_job.sh from scratch")
    parser.add_argument("--skip-validate", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "uptime_before": os.popen("uptime").read().strip()}

    if not args.skip_validate:
        models = ensure_models()
        cmd = [str(SPECDEC), "validate",
               "--drafter", f"bigram=ngram:{models['plain-2gram']}",
               "--drafter", f"4-gram=ngram:{models['plain-4gram']}",
               "--drafter", f"aligned-4-gram=ngram:{models['aligned-4gram']}",
               "--drafter", "lookup=lookup",
               "--gammas", args.gammas, "--temperatures", "0,1", "--prompts", str(args.prompts),
               "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats),
               "--alpha-tokens", str(args.alpha_tokens), "--alpha-new-tokens", str(args.alpha_new_tokens),
               "--out", str(args.out)]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        summary["validate_seconds"] = round(time.perf_counter() - start, 1)
        summary["validate_command"] = " ".join(cmd).replace(str(REPO) + "/", "")
        d = json.loads((args.out / "validation.json").read_text())
        summary["extended_within_tolerance"] = f"{d['extended_within_tolerance']}/{d['configurations']}"
        summary["stage_seconds"] = d["seconds"]

    if args.main_job:
        corpus = aligned_corpus_dir()
        shutil.rmtree(NGRAM, ignore_errors=True)
        if corpus is not None:
            shutil.rmtree(corpus, ignore_errors=True)
        start = time.perf_counter()
        subprocess.run(["bash", str(REPO / "scripts" / "main_job.sh"), "--out", str(args.out / "main-job")],
                       check=True, stdout=open(args.out / "main-job.log", "w"), stderr=subprocess.STDOUT)
        summary["main_job_seconds"] = round(time.perf_counter() - start, 1)

    summary["uptime_after"] = os.popen("uptime").read().strip()
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    json.dump(summary, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
