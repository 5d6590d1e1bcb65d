# llama.cpp's confidence cut-off (issue 52: "in llama.cpp, a p-min grid predicted within 10 %"): the
# distilled draft d2 (q8_0 GGUF, `-md`) beside the default target's Q4_1 GGUF at --spec-draft-n-max 4
# and --spec-draft-p-min 0, 0.3, 0.5, 0.7, 0.9, T = 0, code/edit/chat, 3 prompts each. The engine's
# costs first (target t(k) at contexts spanning the prompts', 75-286 tokens; the draft's own step and,
# since 2026-11-28, its batch pass and looks inside the loop: engines/llamacpp/draft_loop.py), then specdec's estimate of the same draft's HF
# folder on the same prompts with the confidence law over the draft's top 10 (what p-min reads), then
# the grid: prediction (a) from the engine's counts and traced draft lengths, (b) from the estimate
# alone (docs/engines.md, "Draft length by confidence"). Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-pmin.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-pmin}
mkdir -p "$OUT"
DRAFT=.cache/drafts/d2-q8_0.gguf
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp costs --batch-sizes 1 --contexts 64,176,288 --k 1,2,3,4,5 --repeats 3 --new-tokens 32 \
  --draft "$DRAFT" --out "$OUT/costs-pmin.json"
echo "costs $(date -u +%T)"
.venv/bin/specdec estimate --drafter model:.cache/drafts/d2 --workload code,edit,chat --tokens 192 --new-tokens 64 \
  --max-k 5 --no-timing --temperature 0 --confidence-top-k 10 --json > "$OUT/estimate-d2-top10.json"
echo "estimate $(date -u +%T)"
args=()
for p in 0 0.3 0.5 0.7 0.9; do
  label="draft d2-q8_0 g4"; [ "$p" = 0 ] || label="$label p$p"
  args+=(--estimate "$label=$OUT/estimate-d2-top10.json")
done
.venv/bin/specdec llamacpp validate --costs "$OUT/costs-pmin.json" --workloads code,edit,chat --prompts 3 \
  --temperatures 0 --repeats 2 --new-tokens 64 --no-advise --grid "ngram-simple g4=$(.venv/bin/python -c \
  "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")" \
  --draft "$DRAFT" --draft-gammas 4 --draft-p-min 0,0.3,0.5,0.7,0.9 "${args[@]}" --out "$OUT/validate-pmin.json"
echo "end $(date -u +%T)"
