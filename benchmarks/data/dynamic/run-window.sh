# Issue 52, the estimation window matched to the decodes: the tau grid of run.sh again, with the
# estimator scoring exactly the stretch the decodes generate (--alpha-new-tokens = --new-tokens = 24,
# 10 prompts x 24 positions per workload and temperature), the decodes running those same 10 prompts
# (5 of them until 2026-11-28: the decoded half accepted more than the estimate's 10 at some thresholds, and
# one near-tie went against the plan by 2.7-4.2 %; RESULTS-history.md). Nothing is fitted: every rule
# is predicted from that estimate and the timed costs. Run quiet, under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/dynamic/run-window.sh OUT_DIR [validate options]
# Each decode is timed 3 times, interleaved (--repeats 3; the runs of 2026-11-26/27 timed it once: their
# decodes' counts were identical run to run, their wall clocks 6-8 % apart in some cells). Options after
# OUT_DIR are appended (`--repeats 1` gives the earlier runs' timing).
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/dyn52w}
echo "start $(date -u)" >&2
P="--draft-policy confidence:tau=0.3,n_max=6 --draft-policy confidence:tau=0.5,n_max=6 --draft-policy confidence:tau=0.7,n_max=6 --draft-policy confidence:tau=0.9,n_max=6 --draft-policy heuristic:initial=2,n_max=6,persist=1"
.venv/bin/specdec validate --workload code,edit \
  --drafter d2=model:.cache/drafts/d2 --drafter 4-gram=ngram:.cache/ngram/main/plain-4gram \
  --gammas 1,2 $P --temperatures 0,1 --prompts 10 --new-tokens 24 --alpha-tokens 240 --alpha-new-tokens 24 \
  --retries 1 --max-k 7 --timing-repeats 5 --sweep-repeats 1 --repeats 3 --no-figures --out "$OUT" "${@:2}"
echo "end $(date -u)" >&2
