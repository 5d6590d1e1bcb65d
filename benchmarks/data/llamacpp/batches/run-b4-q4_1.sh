# The Q4_1 synthetic point at B = 4 (issue 50's one crossover miss, measured 1.02x [0.995, 1.048] over 3 repeats in
# run-batches.sh): the engine's costs at B = 1, 2, 4, then that point alone over 16 repeats, and its replay from each
# request's own steps (benchmarks/bench_llamacpp_replay_batches.py). Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/batches/run-b4-q4_1.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../../.."
OUT=${1:-/tmp/llamacpp-b4}
mkdir -p "$OUT"
MODEL=$(.venv/bin/python -c "from specdec.reference.data.default_model import gguf_path; print(gguf_path())")
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp costs --model "$MODEL" --k 1,2,3,4,5 --batch-sizes 1,2,4 --contexts 235 --repeats 2 \
  --new-tokens 64 --out "$OUT/costs-b124-q4_1.json"
echo "costs $(date -u +%T)"
.venv/bin/specdec llamacpp validate --model "$MODEL" --costs "$OUT/costs-b124-q4_1.json" --batch-sizes 4 \
  --workloads edit --prompts 8 --temperatures 0 --repeats 16 --new-tokens 96 --out "$OUT/batches-b4-q4_1.json" --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561"
echo "validate $(date -u +%T)"
.venv/bin/python benchmarks/bench_llamacpp_replay_batches.py --batches "$OUT/batches-b4-q4_1.json" \
  --costs "$OUT/costs-b124-q4_1.json" --model "$MODEL" --config "synthetic p0.9 g4" --json "$OUT/replay-b4-q4_1-synthetic.json"
echo "end $(date -u +%T)"
