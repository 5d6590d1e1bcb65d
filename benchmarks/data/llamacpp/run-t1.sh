# llama.cpp at T = 1 where only T = 0 had been run (issue 50: the draft model's rows and the batches
# "at T = 0 and T = 1"): the engine's costs at B = 1, 2, 4, 8 with the draft d2-q8_0 timed too, then
# (1) the draft rows (n-max 1 and 4, p-min 0, 0.5 and 0.9) beside ngram-simple at T = 1 on code, edit and
# chat, prediction (a) from the engine's counts and traced draft lengths (no (b): at T > 0 llama.cpp
# accepts a greedy draft token when the target samples it, which specdec's estimate of a sampled draft
# does not describe, docs/engines.md), and (2) B = 1, 2, 4, 8 clients at T = 1 on the edit prompt.
# Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-t1.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-t1}
mkdir -p "$OUT"
DRAFT=.cache/drafts/d2-q8_0.gguf
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp costs --k 1,2,3,4,5 --batch-sizes 1,2,4,8 --contexts 256 --repeats 2 --new-tokens 64 \
  --draft "$DRAFT" --out "$OUT/costs-t1.json"
echo "costs $(date -u +%T)"
.venv/bin/specdec llamacpp validate --costs "$OUT/costs-t1.json" --workloads code,edit,chat --prompts 3 \
  --temperatures 1 --repeats 2 --new-tokens 64 --no-advise --grid "ngram-simple g4=$NGRAM" \
  --draft "$DRAFT" --draft-gammas 1,4 --draft-p-min 0,0.5,0.9 --out "$OUT/validate-t1.json"
echo "validate $(date -u +%T)"
.venv/bin/specdec llamacpp validate --costs "$OUT/costs-t1.json" --batch-sizes 1,2,4,8 --workloads edit --prompts 1 \
  --temperatures 1 --repeats 2 --new-tokens 64 --out "$OUT/batches-t1.json" --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561;ngram-simple g4=$NGRAM"
echo "end $(date -u +%T)"
