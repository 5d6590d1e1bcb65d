#!/usr/bin/env bash
# The main job: set up, train the learned drafters, and validate speculative decoding on the
# default target (SmolLM2-135M-Instruct, CPU) end to end:
#
#   1. bash scripts/setup.sh                  (idempotent: venv, KenLM tools, model, corpora)
#   2. specdec ngram build, if absent          4-gram on Shakespeare + Austen (only with MAIN_NGRAM=1)
#   3. specdec eagle train, if absent          a feature draft (EAGLE: one layer over the target's
#                                              features fused with layers 2, 15, 27 as EAGLE-3's,
#                                              training-time test of 3 depths), self-distilled from
#                                              the target's passes over its own answers to the
#                                              workloads' training prompts and corpus text (~6 min)
#   4. specdec heads train, if absent          3 blockwise parallel heads on the frozen target, on
#                                              the same target passes (read back from the cache)
#   5. specdec validate                        three workloads (code, the copy-heavy edit, chat; the
#                                              chat template applied), the feature draft, heads and
#                                              prompt lookup (and the 4-gram), temperature 0: prints the
#                                              speedup by category (Spec-Bench layout), alpha and
#                                              costs by category, the plan's decisions and their
#                                              regret, and every category's tables; writes
#                                              validation.json / .md and the figure to --out.
#
# Usage: bash scripts/main_job.sh [--out DIR]          (default DIR: out)
# Sizes (chosen so that the whole job, set-up and builds included, fits in 20 minutes on 2 CPU
# cores; benchmarks/RESULTS.md has the full grid, t = 0 and 1 with the 4-gram, at ~27 minutes;
# override with environment variables):
#   MAIN_ANSWER_TOKENS=12000    tokens of the target's own answers to training prompts the drafters train on (6000 before 2026-11-25: the feature draft's code alpha 0.40 vs 0.25, answers +1 min; RESULTS.md)
#   MAIN_WORKLOADS=code,edit,chat  embedded workloads (docs/workloads.md)
#   MAIN_ALPHA_TOKENS=384       target-sampled positions for the alpha estimator, per workload and temperature
#   MAIN_PROMPTS=5              held-out prompts decoded per configuration and workload
#   MAIN_NEW_TOKENS=24          tokens per decode (EOS ignored; many short runs average out the machine's speed drift: README)
#   MAIN_GAMMAS=2,8             draft lengths (the heads draft at most 3, so they run 2)
#   MAIN_HEADS_TOKENS=32768     teacher-forced tokens the heads and the feature draft train on (the answers, Python source, then corpus text)
#   MAIN_CODE_TOKENS=0          of them, tokens of Python source (the interpreter's standard library: code alpha 0.40 -> 0.45 with 65,536 of it, training 3x longer; docs/eagle.md "Python source")
#   MAIN_EAGLE_EPOCHS=8         epochs of the feature draft (4: held-out top-1 0.158 at depth 1, 8: 0.210, fused 0.227; RESULTS.md)
#   MAIN_REPEATS=1              repeats of each decode
#   MAIN_TEMPERATURES=0         sampling temperatures (0,1: the full grid, ~8 more minutes)
#   MAIN_NGRAM=0                1: build the 4-gram and validate it too (~2 more minutes per temperature)
# On a machine shared with other heavy jobs, run it under the team lock:
#   flock /tmp/specdec-cpu.lock bash scripts/main_job.sh
# (the script takes no lock itself, so wrapping it cannot deadlock).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

OUT="out"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    --out=*) OUT="${1#--out=}"; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "main_job.sh: unknown argument $1 (usage: bash scripts/main_job.sh [--out DIR])" >&2; exit 2 ;;
  esac
done

ANSWER_TOKENS="${MAIN_ANSWER_TOKENS:-12000}"
WORKLOADS="${MAIN_WORKLOADS:-code,edit,chat}"
ALPHA_TOKENS="${MAIN_ALPHA_TOKENS:-384}"
PROMPTS="${MAIN_PROMPTS:-5}"
NEW_TOKENS="${MAIN_NEW_TOKENS:-24}"
GAMMAS="${MAIN_GAMMAS:-2,8}"
HEADS_TOKENS="${MAIN_HEADS_TOKENS:-32768}"
CODE_TOKENS="${MAIN_CODE_TOKENS:-0}"
REPEATS="${MAIN_REPEATS:-1}"
EAGLE_EPOCHS="${MAIN_EAGLE_EPOCHS:-8}"
TEMPERATURES="${MAIN_TEMPERATURES:-0}"
NGRAM="${MAIN_NGRAM:-0}"

START=$(date +%s)
stamp() { printf '[main %4ds] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }

stamp "1/5 set-up (scripts/setup.sh)"
bash scripts/setup.sh
SPECDEC="$ROOT/.venv/bin/specdec"

NG="$ROOT/.cache/ngram/main"
build() {  # build NAME ARGS...: specdec ngram build into $NG/NAME unless it is there already
  local name="$1"; shift
  if [ -f "$NG/$name/model.json" ]; then
    stamp "   n-gram $name: already built ($NG/$name)"
  else
    stamp "   n-gram $name: building"
    "$SPECDEC" ngram build "$@" --out "$NG/$name"
  fi
}
DRAFTERS=()
if [ "$NGRAM" = 1 ]; then
  stamp "2/5 n-gram drafter (4-gram on the plain corpus)"
  build plain-4gram --order 4 --corpus plain
  DRAFTERS+=(--drafter "4-gram=ngram:$NG/plain-4gram")
else
  stamp "2/5 n-gram drafter: skipped (MAIN_NGRAM=1 builds and validates the 4-gram)"
fi

EAGLE="$ROOT/.cache/eagle/main"
if [ -f "$EAGLE/card.json" ]; then
  stamp "3/5 feature draft: already trained ($EAGLE)"
else
  stamp "3/5 feature draft: training on $HEADS_TOKENS tokens ($ANSWER_TOKENS of the target's answers to training prompts, $CODE_TOKENS of Python source), fusing layers 2, 15, 27 (EAGLE-3)"
  "$SPECDEC" eagle train --tokens "$HEADS_TOKENS" --aligned-tokens "$ANSWER_TOKENS" --code-tokens "$CODE_TOKENS" \
    --sampled-from workloads --epochs "$EAGLE_EPOCHS" --fuse-layers eagle3 --out "$EAGLE"
fi

HEADS="$ROOT/.cache/heads/main"
if [ -f "$HEADS/card.json" ]; then
  stamp "4/5 heads: already trained ($HEADS)"
else
  stamp "4/5 heads: training 3 heads on the feature draft's target passes ($HEADS_TOKENS tokens)"
  "$SPECDEC" heads train --heads 3 --tokens "$HEADS_TOKENS" --aligned-tokens "$ANSWER_TOKENS" --code-tokens "$CODE_TOKENS" \
    --sampled-from workloads --out "$HEADS"
fi

stamp "5/5 validation: workloads $WORKLOADS, gammas $GAMMAS, temperatures $TEMPERATURES, $PROMPTS prompts x $NEW_TOKENS tokens x $REPEATS repeat(s), alpha from $ALPHA_TOKENS positions per workload and temperature"
"$SPECDEC" validate --workload "$WORKLOADS" \
  --drafter "eagle=eagle:$EAGLE" \
  --drafter "heads=heads:$HEADS" \
  "${DRAFTERS[@]}" --drafter "lookup=lookup" \
  --gammas "$GAMMAS" --temperatures "$TEMPERATURES" --prompts "$PROMPTS" --new-tokens "$NEW_TOKENS" \
  --repeats "$REPEATS" --alpha-tokens "$ALPHA_TOKENS" --max-k 9 --out "$OUT"
stamp "done in $(( $(date +%s) - START )) s; results and figures in $OUT/"
