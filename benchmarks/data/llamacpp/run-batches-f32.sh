# llama.cpp's batches with the default target at f32 (issue 50: "B in {1, 2, 4, 8}: throughput speedup predicted
# within 10 %, measured crossover = predicted"), as run-batches-t0.sh does at Q4_1: the engine's costs at
# B = 1, 2, 4, 8 (prompts cached), then B = 1, 2, 4, 8 clients on the copy-heavy edit prompt at T = 0, 3 repeats,
# predicted by the ragged batch model from the counts at B = 1. At f32 a one-token step is memory-bound, so
# speculation pays more at B = 1 (run-f32.sh) and the question is where batching takes it away. Run quiet,
# under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-batches-f32.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-batches-f32}
mkdir -p "$OUT"
F32="$OUT/smollm2-135m-instruct-f32.gguf"
Q4=$(.venv/bin/python -c "from specdec.reference.data.default_model import gguf_path; print(gguf_path())")
[ -f "$F32" ] || .venv/bin/specdec draft export .cache/models/smollm2-135m-instruct --out "$F32" --type f32 --vocab-from "$Q4"
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp costs --model "$F32" --k 1,2,3,4,5 --batch-sizes 1,2,4,8 --contexts 256 --repeats 2 \
  --new-tokens 64 --out "$OUT/costs-b1248-f32.json"
echo "costs $(date -u +%T)"
.venv/bin/specdec llamacpp validate --model "$F32" --costs "$OUT/costs-b1248-f32.json" --batch-sizes 1,2,4,8 \
  --workloads edit --prompts 1 --temperatures 0 --repeats 3 --new-tokens 64 --out "$OUT/batches-f32.json" --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561;ngram-simple g4=$NGRAM"
echo "end $(date -u +%T)"
