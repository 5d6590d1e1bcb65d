# The default target in llama.cpp at f32 instead of the wheel's Q4_1 (issue 50: "measured range in the
# engine spanning below 1x to at least 2x"). At Q4_1 (and f16, run-f16.sh) the step is compute-bound on one
# core and a long verify costs nearly its tokens in steps; at f32 the one-token step reads 540 MB and is
# memory-bound (llama-bench 2026-11-27: a 16-token pass 2.4x a 1-token one at f32, 7.5x at Q4_1), so long
# accepted n-gram drafts pay. The f32 GGUF is written from the float32 cache the set-up made of the Q4_1 file
# (the same model's numbers; vocabulary from the Q4_1 file) by the draft model's exporter. Then per workload
# the engine's costs and the validation grid (the default one plus ngram-simple g32) at T = 0 and 1 with the
# advice run, so the plan's pick is checked in every (workload, T) cell, and prediction (b) beside (a). Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-f32.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-f32}
mkdir -p "$OUT"
F32="$OUT/smollm2-135m-instruct-f32.gguf"
Q4=$(.venv/bin/python -c "from specdec.reference.data.default_model import gguf_path; print(gguf_path())")
echo "start $(date -u +%T) from $Q4"
[ -f "$F32" ] || .venv/bin/specdec draft export .cache/models/smollm2-135m-instruct --out "$F32" --type f32 --vocab-from "$Q4"
# prediction (b): specdec's estimator alone, with llama.cpp's own n-gram rules (llamacpp:ngram-simple:N,
# llamacpp:ngram-mod: the drafters the engine runs), on the same first 2 prompts of each workload
# sampled as the engine's requests are (validation.SAMPLER, llama-server's default truncation); at T = 1 each
# prompt continued 16 times (2 continuations a category gave an edit's ngram-simple 1.17 to 1.90 tokens a step
# by seed, 2026-11-27: the engine's 4 requests are not the estimator's expectation either, but 2 are noise)
SAMPLER="--top-k 40 --top-p 0.95 --min-p 0.05"
for T in 0 1; do
  SAMPLES=$([ $T = 0 ] && echo "--tokens 192" || echo "--tokens 3072 --samples-per-prompt 16")
  for D in ngram-simple:1 ngram-simple:3 ngram-mod; do
    .venv/bin/specdec estimate --drafter llamacpp:$D --workload code,edit,chat $SAMPLES --new-tokens 96 \
      --max-k 33 --no-timing --temperature $T $SAMPLER --json > "$OUT/estimate-${D/:/-}-T$T.json"
  done
done
echo "estimates $(date -u +%T)"
GRID=$(.venv/bin/python -c "
from specdec.engines.llamacpp.validation import default_grid, ngram
print(';'.join(f'{c.label}={c.command_line()}' for c in default_grid()[1:] + [ngram('ngram-simple', 32)]))")
EST=""
for T in 0 1; do
  for L in "synthetic p0.8 g4" "synthetic p0.8 g12"; do EST="$EST --estimate '$L=$OUT/estimate-ngram-simple-1-T$T.json'"; done
  for L in "ngram-simple g4" "ngram-simple g16" "ngram-simple g32"; do EST="$EST --estimate '$L=$OUT/estimate-ngram-simple-3-T$T.json'"; done
  for L in "ngram-mod g8" "ngram-mod g32"; do EST="$EST --estimate '$L=$OUT/estimate-ngram-mod-T$T.json'"; done
done
# per workload: the engine's costs timed right before its grid (the f32 one-token step is memory-bound
# and moved 10 % between a cost run and a grid 10 minutes later, 2026-11-27) at two contexts around the
# requests' (~140 tokens on chat, ~210 on code, ~275 on edit: a k-token verify's cost grows with k L, and at
# one context, 296 tokens, the short requests' long drafts were over-priced, 2026-11-27), then the grid
for W in code edit chat; do
  .venv/bin/specdec llamacpp costs --model "$F32" --batch-sizes 1 --contexts 96,320 --k 1,2,3,4,6,8,12,16,24,32 \
    --repeats 2 --new-tokens 64 --out "$OUT/costs-f32-$W.json"
  eval .venv/bin/specdec llamacpp validate --model "$F32" --costs "$OUT/costs-f32-$W.json" --workloads $W --prompts 2 \
    --temperatures 0,1 --repeats 2 --new-tokens 96 --grid "'$GRID'" --advise-from "'ngram-simple g32'" $EST \
    --out "$OUT/validate-f32-$W.json"
  echo "$W $(date -u +%T)"
done
echo "end $(date -u +%T)"
