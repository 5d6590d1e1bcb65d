#!/usr/bin/env bash
# The main job: set up, build and train the drafters, and validate speculative decoding on the
# default target (SmolLM2-135M-Instruct, CPU) end to end, at temperatures 0 and 1 (greedy
# decoding and exact speculative sampling, Algorithm 1):
#
#   1. bash scripts/setup.sh                  (idempotent: venv, KenLM tools, model, corpora; not
#                                              llama.cpp's server, which the main job does not run)
#   2. specdec ngram build, if absent          a KenLM 4-gram over the target's token ids on
#                                              Shakespeare + Austen (~30 s)
#   3. specdec eagle train, if absent          the learned drafter: a feature draft (EAGLE: one layer
#                                              over the target's features fused with layers 2, 15, 27
#                                              as EAGLE-3's, training-time test of 3 depths),
#                                              self-distilled from the target's passes over its own
#                                              answers to the workloads' training prompts and corpus
#                                              text (~7 min)
#   4. specdec heads train, if absent          3 blockwise parallel heads on the frozen target, on
#                                              the same target passes (read back from the cache; ~40 s)
#   5. specdec validate                        three workloads (code, the copy-heavy edit, chat; the
#                                              chat template applied) x the feature draft, the heads,
#                                              the 4-gram and prompt lookup x temperatures 0 and 1:
#                                              prints the speedup by category (Spec-Bench layout), alpha
#                                              and costs by category, the plan's decisions and their
#                                              regret, and every category's tables; writes
#                                              validation.json / .md and the figures to --out.
#   6. the verdict                             a few lines: how many predictions held, the measured
#                                              range, the plan's regret, where the files are.
#
# Usage: bash scripts/main_job.sh [--out DIR]          (default DIR: out)
# Sizes (chosen so that the whole job, set-up and one-time builds included, fits in 25 minutes on
# 2 CPU cores; README "The main job" has what each stage costs; override with environment variables):
#   MAIN_ANSWER_TOKENS=8000     tokens of the target's own answers to training prompts the drafters train on (12000: the feature draft's code alpha ~0.39 against ~0.25 at 6000, answers ~+1.5 min; trimmed to fit t = 1 and the 4-gram in 25 min)
#   MAIN_WORKLOADS=code,edit,chat  embedded workloads (docs/workloads.md)
#   MAIN_ALPHA_TOKENS=384       target-sampled positions for the alpha estimator, per workload and temperature
#   MAIN_PROMPTS=5              held-out prompts decoded per configuration and workload
#   MAIN_NEW_TOKENS=24          tokens per decode (EOS ignored; many short runs average out the machine's speed drift: README)
#   MAIN_GAMMAS=2,8             draft lengths (the heads draft at most 3, so they run 2)
#   MAIN_HEADS_TOKENS=32768     teacher-forced tokens the heads and the feature draft train on (the answers, Python source, then corpus text)
#   MAIN_CODE_TOKENS=0          of them, tokens of Python source (the interpreter's standard library: code alpha 0.40 -> 0.45 with 65,536 of it, training 3x longer; docs/eagle.md "Python source")
#   MAIN_EAGLE_EPOCHS=6         epochs of the feature draft (4: held-out top-1 0.158 at depth 1, 8: 0.210; each epoch ~35 s here)
#   MAIN_REPEATS=1              repeats of each decode
#   MAIN_TEMPERATURES=0,1       sampling temperatures (0: greedy only, about half the validation's time)
#   MAIN_NGRAM=1                0: skip the KenLM 4-gram drafter (not built, not validated)
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
    -h|--help) sed -n '2,47p' "$0"; exit 0 ;;
    *) echo "main_job.sh: unknown argument $1 (usage: bash scripts/main_job.sh [--out DIR])" >&2; exit 2 ;;
  esac
done

ANSWER_TOKENS="${MAIN_ANSWER_TOKENS:-8000}"
WORKLOADS="${MAIN_WORKLOADS:-code,edit,chat}"
ALPHA_TOKENS="${MAIN_ALPHA_TOKENS:-384}"
PROMPTS="${MAIN_PROMPTS:-5}"
NEW_TOKENS="${MAIN_NEW_TOKENS:-24}"
GAMMAS="${MAIN_GAMMAS:-2,8}"
HEADS_TOKENS="${MAIN_HEADS_TOKENS:-32768}"
CODE_TOKENS="${MAIN_CODE_TOKENS:-0}"
REPEATS="${MAIN_REPEATS:-1}"
EAGLE_EPOCHS="${MAIN_EAGLE_EPOCHS:-6}"
TEMPERATURES="${MAIN_TEMPERATURES:-0,1}"
NGRAM="${MAIN_NGRAM:-1}"

START=$(date +%s)
stamp() { printf '[main %4ds] %s\n' "$(( $(date +%s) - START ))" "$*" >&2; }
STAGES=""  # "name seconds; ..." for the verdict
LAST=$START
staged() { local now; now=$(date +%s); STAGES="$STAGES${STAGES:+, }$1 $(( now - LAST )) s"; LAST=$now; }

stamp "1/6 set-up (scripts/setup.sh)"
# llama.cpp's server is built by the set-up for the engine's tests (5-6 min on 2 cores); the main job
# runs no engine yet, so it skips that build unless SPECDEC_LLAMACPP=1 asks for it.
SPECDEC_LLAMACPP="${SPECDEC_LLAMACPP:-0}" bash scripts/setup.sh
staged set-up
SPECDEC="$ROOT/.venv/bin/specdec"

NG="$ROOT/.cache/ngram/main"
DRAFTERS=()
if [ "$NGRAM" = 1 ]; then
  if [ -f "$NG/plain-4gram/model.json" ]; then
    stamp "2/6 n-gram drafter: already built ($NG/plain-4gram)"
  else
    stamp "2/6 n-gram drafter: building a KenLM 4-gram on the plain corpus (Shakespeare + Austen)"
    "$SPECDEC" ngram build --order 4 --corpus plain --out "$NG/plain-4gram"
  fi
  DRAFTERS+=(--drafter "4-gram=ngram:$NG/plain-4gram")
else
  stamp "2/6 n-gram drafter: skipped (MAIN_NGRAM=0)"
fi
staged n-gram

EAGLE="$ROOT/.cache/eagle/main"
if [ -f "$EAGLE/card.json" ]; then
  stamp "3/6 feature draft: already trained ($EAGLE)"
else
  stamp "3/6 feature draft: training on $HEADS_TOKENS tokens ($ANSWER_TOKENS of the target's answers to training prompts, $CODE_TOKENS of Python source), fusing layers 2, 15, 27 (EAGLE-3)"
  "$SPECDEC" eagle train --tokens "$HEADS_TOKENS" --aligned-tokens "$ANSWER_TOKENS" --code-tokens "$CODE_TOKENS" \
    --sampled-from workloads --epochs "$EAGLE_EPOCHS" --fuse-layers eagle3 --out "$EAGLE"
fi
staged "feature draft"

HEADS="$ROOT/.cache/heads/main"
if [ -f "$HEADS/card.json" ]; then
  stamp "4/6 heads: already trained ($HEADS)"
else
  stamp "4/6 heads: training 3 heads on the feature draft's target passes ($HEADS_TOKENS tokens)"
  "$SPECDEC" heads train --heads 3 --tokens "$HEADS_TOKENS" --aligned-tokens "$ANSWER_TOKENS" --code-tokens "$CODE_TOKENS" \
    --sampled-from workloads --out "$HEADS"
fi
staged heads

stamp "5/6 validation: workloads $WORKLOADS, gammas $GAMMAS, temperatures $TEMPERATURES, $PROMPTS prompts x $NEW_TOKENS tokens x $REPEATS repeat(s), alpha from $ALPHA_TOKENS positions per workload and temperature"
"$SPECDEC" validate --workload "$WORKLOADS" \
  --drafter "eagle=eagle:$EAGLE" \
  --drafter "heads=heads:$HEADS" \
  "${DRAFTERS[@]}" --drafter "lookup=lookup" \
  --gammas "$GAMMAS" --temperatures "$TEMPERATURES" --prompts "$PROMPTS" --new-tokens "$NEW_TOKENS" \
  --repeats "$REPEATS" --alpha-tokens "$ALPHA_TOKENS" --max-k 9 --out "$OUT"
staged validation

stamp "6/6 verdict"
# The verdict: read back from validation.json (the one record of the run), so it says what the
# tables above say, in a few lines a newcomer can read.
"$ROOT/.venv/bin/python" - "$OUT" "$(( $(date +%s) - START ))" "$STAGES" <<'PY'
import json, sys
from pathlib import Path

out, seconds, stages = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
d = json.loads((out / "validation.json").read_text())
cats = d.get("categories") or {"": d}
rows = [(c, r) for c, v in cats.items() for r in v["rows"]]
tol = d.get("tolerance", 0.10)

def name(c, r):
    return f"{r['drafter']} gamma {r['gamma']} at t = {r['temperature']:g}" + (f" on {c}" if c else "")

held = sum(bool(r["extended_within_tolerance"]) for _, r in rows)
worst = max(rows, key=lambda cr: abs(cr[1]["error_extended"]))
lo, hi = min(rows, key=lambda cr: cr[1]["measured"]), max(rows, key=lambda cr: cr[1]["measured"])
decisions = d["decisions"]
good = sum(bool(x["within_goal"]) for x in decisions)
regret = max(decisions, key=lambda x: x["regret"])
print("\n== Verdict ==")
print(f"Predictions held: {held} of {len(rows)} measured speedups within {100 * tol:.0f}% of the prediction "
      f"(largest error {100 * worst[1]['error_extended']:+.1f}%, {name(*worst)}).")
print(f"Measured speedup over plain decoding: {lo[1]['measured']:.2f}x ({name(*lo)}) to "
      f"{hi[1]['measured']:.2f}x ({name(*hi)}).")
print(f"The plan (from the estimator alone) chose the measured best, or within 3% of it, in {good} of "
      f"{len(decisions)} (workload, temperature) cases; largest regret {100 * regret['regret']:.1f}% "
      f"({regret['category']}, t = {regret['temperature']:g}: picked {regret['pick'] or 'no speculation'}, "
      f"best {regret['best'] or 'plain decoding'}).")
figures = ", ".join(Path(f).name for f in d.get("figures", [])) or "none"
print(f"Files: {out}/validation.md (every table), {out}/validation.json; figures in {out}/: {figures}.")
print(f"Took {seconds // 60} min {seconds % 60} s ({stages}).")
PY
