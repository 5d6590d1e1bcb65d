# Issue 52, the position-conditioned law: (1) the earlier run's measured draft counts against
# the pooled and the per-position law, re-estimated from its own estimator samples (recount.py);
# (2) held-out workloads (chat, summarize) decoded by the same drafters under the same rules,
# predicted from the per-position law. Run under the team lock:
#   flock /tmp/specdec-heavy.lock bash benchmarks/data/dynamic/run-positions.sh
# Every step ends by DEADLINE (UTC; the measurement window) and within 11.5 minutes of the start,
# or is skipped.
cd "$(dirname "$0")/../../.."
DEADLINE=${DEADLINE:-13:20}
END=$(date -u -d "$DEADLINE" +%s)
CAP=$(( $(date -u +%s) + 690 ))
[ "$CAP" -lt "$END" ] && END=$CAP
left() { echo $(( END - $(date -u +%s) )); }
echo "start $(date -u)" >&2
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) < 200 ? $(left) : 200 )) .venv/bin/python benchmarks/data/dynamic/recount.py \
    benchmarks/data/dynamic/validation-issue52.json /tmp/recount-issue52.json
  echo "recount rc $? at $(date -u)" >&2
fi
P="--draft-policy confidence:tau=0.3,n_max=6 --draft-policy confidence:tau=0.5,n_max=6 --draft-policy confidence:tau=0.7,n_max=6 --draft-policy confidence:tau=0.9,n_max=6 --draft-policy heuristic:initial=2,n_max=6,persist=1"
if [ "$(left)" -gt 300 ]; then
  timeout $(( $(left) - 20 )) .venv/bin/specdec validate --workload chat,summarize \
    --drafter d2=model:.cache/drafts/d2 --drafter 4-gram=ngram:.cache/ngram/main/plain-4gram \
    --gammas 1 $P --temperatures 0,1 --prompts 2 --new-tokens 32 --alpha-tokens 192 --retries 0 --max-k 7 \
    --timing-repeats 3 --sweep-repeats 1 --no-figures --out /tmp/dyn52h
  echo "validate rc $? at $(date -u)" >&2
fi
echo "end $(date -u)" >&2
