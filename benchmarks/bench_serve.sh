#!/usr/bin/env bash
# Serving scale on the default target (benchmarks/RESULTS.md, "Ragged batched decoding"): set-up,
# the plain 4-gram, then `specdec serve-bench` over B = 1..32 at two context lengths with prompt
# lookup and the 4-gram at gamma 2 and 4, then the padded-vs-packed layout benchmark.
#   flock /tmp/specdec-cpu.lock bash benchmarks/bench_serve.sh [OUT]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
OUT="${1:-out/serve}"
bash scripts/setup.sh
SPECDEC="$ROOT/.venv/bin/specdec"
NG="$ROOT/.cache/ngram/main/plain-4gram"
[ -f "$NG/model.json" ] || "$SPECDEC" ngram build --order 4 --corpus plain --out "$NG"
"$SPECDEC" serve-bench --drafter lookup=lookup --drafter "4-gram=ngram:$NG" --gammas 2,4 \
  --batch-sizes 1,2,4,8,16,32 --contexts 128,1024 --new-tokens 24 --prompts 8 --blocks 2 --out "$OUT"
"$ROOT/.venv/bin/python" benchmarks/bench_layout.py --batch-sizes 1,4,16 --contexts 128,1024 --ks 1,3,5 \
  | tee "$OUT/layout.md"
