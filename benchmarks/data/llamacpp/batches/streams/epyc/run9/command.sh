#!/bin/bash
# run 9: run 8's validate (same grid, run 8's cost file) with the shared untimed queue
echo 0 > /proc/self/autogroup
cd /tmp/snap
D=/tmp/s28/run9
NGRAM=$(.venv/bin/python -c "from specdec.engines.llamacpp.config import ngram_flags; print(ngram_flags(4)['ngram-simple'])")
echo "start $(date -u +%T)"
flock /tmp/specdec-heavy.lock .venv/bin/specdec llamacpp validate --model $D/smollm2-135m-instruct-f32.gguf --costs $D/costs-b1248-f32.json --batch-sizes 1,2,4,8 \
  --workloads edit --prompts 8 --temperatures 0,1 --repeats 3 --new-tokens 96 --arrivals streams \
  --out $D/batches-f32-streams.json --grid \
  "synthetic p0.9 g4=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 4 --spec-synth-rates 0.9,0.81,0.729,0.6561;ngram-simple g4=$NGRAM;ngram-simple g1=--spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-ngram-simple-size-m 1;ngram-simple g3=--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 3"
echo "end $(date -u +%T) rc=$?"
