# Ran as /tmp/s12/val-q4.sh (15:39-15:53 UTC) with the cost file costs-b1248-q4_1-2.json, timed 15:06-15:20 by
# run-batches.sh in the same session (the costs do not depend on how the B clients arrive).
set -e
cd "$(dirname "$0")/../../../../.."
MODEL=$(.venv/bin/python -c "from specdec.reference.data.default_model import gguf_path; print(gguf_path())")
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
echo "start $(date -u +%T)"
.venv/bin/specdec llamacpp validate --model "$MODEL" --costs /tmp/s12/bq4b/costs-b1248-q4_1.json --batch-sizes 1,2,4,8 \
  --workloads edit --prompts 8 --temperatures 0 --repeats 3 --new-tokens 96 --arrivals streams \
  --out /tmp/s12/bq4b/batches-q4_1-streams.json --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561;ngram-simple g4=$NGRAM"
echo "end $(date -u +%T)"
