#!/usr/bin/env bash
# The GPU regime's check in one device call (issue 54; docs/roofline.md, "The captured path"):
#   bash benchmarks/gpu_check.sh [OUT] [gpu_check.py options]
# Runs under the machine's own python3 and torch (no set-up, no network): the package is laid
# out as `specdec` by symlinks in a scratch folder, as an install would. OUT defaults to $OUT
# (the device tool's folder), else ./gpu-check. Under 9 minutes on an H100/H200 by default
# (the timing stops itself at --budget-s and writes what it measured).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-${OUT:-$ROOT/gpu-check}}"
shift || true
PY="${PYTHON:-python3}"
[ -x "$ROOT/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && ! "$PY" -c "import torch" 2>/dev/null && PY="$ROOT/.venv/bin/python"
SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
mkdir -p "$SITE/specdec"
cp -r "$ROOT"/specdec/. "$SITE/specdec/"
for d in simulator ngram figures reference engines; do ln -s "$ROOT/$d" "$SITE/specdec/$d"; done
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$DEST"
command -v nvidia-smi >/dev/null && nvidia-smi > "$DEST/nvidia-smi.txt" 2>&1 || true
SCRIPT="${GPU_SCRIPT:-gpu_check.py}"  # gpu_estimate.py: `specdec estimate --batch-sizes` end to end instead
"$PY" "$ROOT/benchmarks/$SCRIPT" --out "$DEST" "$@" 2>&1 | tee "$DEST/${SCRIPT%.py}.log"
