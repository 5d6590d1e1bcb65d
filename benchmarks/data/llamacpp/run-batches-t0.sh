# llama.cpp's batches at T = 0, quiet, the costs and the batches in one run (issue 50: "B in {1, 2, 4, 8}:
# throughput speedup predicted within 10 %, measured crossover = predicted"). The last T = 0 batch run
# (12:14 UTC on 2026-11-26) was timed under a load moving between 1 and 3 cores, its costs 6 minutes
# apart. Here: the engine's costs at B = 1, 2, 4, 8 (prompts cached), then B = 1, 2, 4, 8 clients on the
# copy-heavy edit prompt at T = 0, 3 repeats, predicted by the ragged batch model from the counts at B = 1.
# Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-batches-t0.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-batches-t0}
mkdir -p "$OUT"
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp costs --k 1,2,3,4,5 --batch-sizes 1,2,4,8 --contexts 256 --repeats 2 --new-tokens 64 \
  --out "$OUT/costs-b1248-t0.json"
echo "costs $(date -u +%T)"
.venv/bin/specdec llamacpp validate --costs "$OUT/costs-b1248-t0.json" --batch-sizes 1,2,4,8 --workloads edit \
  --prompts 1 --temperatures 0 --repeats 3 --new-tokens 64 --out "$OUT/batches-t0.json" --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561;ngram-simple g4=$NGRAM"
echo "end $(date -u +%T)"
