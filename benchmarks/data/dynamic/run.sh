cd "$(dirname "$0")/../../.."
echo "start $(date -u)" >&2
P="--draft-policy confidence:tau=0.3,n_max=6 --draft-policy confidence:tau=0.5,n_max=6 --draft-policy confidence:tau=0.7,n_max=6 --draft-policy confidence:tau=0.9,n_max=6 --draft-policy heuristic:initial=2,n_max=6,persist=1"
.venv/bin/specdec validate --workload code,edit \
  --drafter d2=model:.cache/drafts/d2 --drafter 4-gram=ngram:.cache/ngram/main/plain-4gram \
  --gammas 1,2 $P --temperatures 0,1 --prompts 3 --new-tokens 24 --alpha-tokens 192 --retries 1 --max-k 7 \
  --timing-repeats 5 --sweep-repeats 1 --no-figures --out /tmp/dyn52c
echo "end $(date -u)" >&2
