# The engine runs the p-min plan (issue 52: "no engine has ever run our advice"): per category, `specdec plan
# --stopping` on the estimate and the cost file of run-pmin.sh's first Xeon run (benchmarks/data/llamacpp/pmin-xeon/
# *-loop.json, 2026-11-28 02:04 UTC), llama.cpp's plan priced at the engine's own costs; then its flags (p-min, n-max)
# run in llama-server on that category's 3 prompts, paired with no speculation and ngram-simple g4, T = 0, 2 repeats:
# measured against the plan's speedup and prediction (a). Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-pmin-advice.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-pmin-advice}
mkdir -p "$OUT"
DATA=benchmarks/data/llamacpp/pmin-xeon
DRAFT=.cache/drafts/d2-q8_0.gguf
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
for category in code edit chat; do
  .venv/bin/specdec plan --stopping "$DATA/estimate-d2-top10-loop.json" --category "$category" \
    --batch-cost-file "$DATA/costs-pmin-loop.json" --max-gamma 4 --json > "$OUT/plan-$category.json"
  read -r tau n_max < <(.venv/bin/python -c "import json, sys; d = json.load(open(sys.argv[1]))['llama.cpp']; \
print(d['tau'], d['n_max'])" "$OUT/plan-$category.json")
  label="draft d2-q8_0 g$n_max"; [ "$tau" = 0.0 ] || label="$label p$(.venv/bin/python -c "print(f'{$tau:g}')")"
  echo "$category: the plan's p-min $tau, n-max $n_max ($(date -u +%T))"
  .venv/bin/specdec llamacpp validate --costs "$DATA/costs-pmin-loop.json" --workloads "$category" --prompts 3 \
    --temperatures 0 --repeats 2 --new-tokens 64 --no-advise --grid "ngram-simple g4=$NGRAM" --draft "$DRAFT" \
    --draft-gammas "$n_max" --draft-p-min "$tau" --estimate "$label=$DATA/estimate-d2-top10-loop.json" \
    --out "$OUT/validate-$category.json"
done
echo "end $(date -u +%T)"
