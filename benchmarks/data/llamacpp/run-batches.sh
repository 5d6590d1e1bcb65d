# llama.cpp's batches (issue 50: "B in {1, 2, 4, 8}: throughput speedup predicted within 10 %, measured
# crossover = predicted"): the engine's costs at B = 1, 2, 4, 8 (prompts cached), then the copy-heavy edit
# workload's 8 prompts, each repeat every prompt once in waves of B clients (B different prompts at once),
# 3 repeats of 96 tokens (each decodes all of them), predicted from the counts at B = 1 by the equal-split model (llama.cpp's micro-batches,
# specdec.simulator.equal_split) and, beside it, by one packed pass. TYPE: the default target's own Q4_1 GGUF
# (compute-bound one-token step on this CPU) or the same model exported to f32 (memory-bound: speculation pays
# more at B = 1, run-f32.sh, and the question is where batching takes it away). The costs are timed at two
# contexts around the edit requests' (208 prompt tokens + 96 decoded): a k-token verify's cost grows with k L, and
# timed at one context (235 prompt tokens, 273 over the decode) the Q4_1 full-draft steps were over-priced against
# the plain ones, enough to put the synthetic row's crossover one B early (2026-11-27: at B = 4 replayed 0.991x
# from one context, 1.011x from 160,320, measured 1.014x). ARRIVALS: waves (the B requests of a wave start
# together) or streams (B clients each sending its requests back to back, out of phase: engines/llamacpp/streams.py).
# The costs time the mixed steps of the grid's draft length 4 (--mixed-k 5: the first r of B slots verifying 5
# tokens, the rest one) on the very server configuration that drafts 4, and the check prices its steps by them
# (since 2026-11-29: on the EPYC at f32 the same micro-batch costs up to 26 % more or less on another server).
# MIXED_K=2,3,4,5 times them at every draft length `plan --from` compares; EXTRA="label=flags;..." adds rows.
# Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-batches.sh OUT_DIR [q4_1|f32] [TEMPERATURES] [ARRIVALS]
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-batches}
TYPE=${2:-q4_1}
TEMPS=${3:-0}
ARRIVALS=${4:-waves}
SUFFIX=$([ "$ARRIVALS" = waves ] && echo "" || echo "-$ARRIVALS")
mkdir -p "$OUT"
MODEL=$(.venv/bin/python -c "from specdec.reference.data.default_model import gguf_path; print(gguf_path())")
if [ "$TYPE" = f32 ]; then
  F32="$OUT/smollm2-135m-instruct-f32.gguf"
  [ -f "$F32" ] || .venv/bin/specdec draft export .cache/models/smollm2-135m-instruct --out "$F32" --type f32 \
    --vocab-from "$MODEL"
  MODEL=$F32
elif [ "$TYPE" != q4_1 ]; then
  echo "TYPE must be q4_1 or f32, got $TYPE" >&2; exit 2
fi
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp costs --model "$MODEL" --k 1,2,3,4,5 --batch-sizes 1,2,4,8 --contexts 160,320 --repeats 2 \
  --new-tokens 64 --mixed-k "${MIXED_K:-5}" --out "$OUT/costs-b1248-$TYPE.json"
echo "costs $(date -u +%T)"
.venv/bin/specdec llamacpp validate --model "$MODEL" --costs "$OUT/costs-b1248-$TYPE.json" --batch-sizes 1,2,4,8 \
  --workloads edit --prompts 8 --temperatures "$TEMPS" --repeats 3 --new-tokens 96 --arrivals "$ARRIVALS" \
  --out "$OUT/batches-$TYPE$SUFFIX.json" --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561;ngram-simple g4=$NGRAM${EXTRA:+;$EXTRA}"
echo "end $(date -u +%T)"
