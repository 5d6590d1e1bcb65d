#!/usr/bin/env bash
# Builds llama.cpp's llama-server and llama-bench (CPU, this machine's ISA, no network features)
# from the llama.cpp vendored in the PyPI sdist llama-cpp-python==0.3.36 (hash-checked; nothing
# else is fetched), once per (source hash, ISA) under $CACHE/llamacpp/<src>-<isa>/, and points
# $CACHE/llamacpp/current at it. Idempotent: a second run with the same source and CPU does
# nothing (seconds). About 5-6 min on 2 cores. Called by scripts/setup.sh; specdec finds the
# binaries through $CACHE/llamacpp/current (engines/llamacpp/server.py), or takes --llama-server.
# LLAMACPP_SDIST=/path/to/llama_cpp_python-0.3.36.tar.gz uses a file already downloaded
# (still hash-checked).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SPECDEC_CACHE:-$ROOT/.cache}"
say() { printf '[llamacpp] %s\n' "$*" >&2; }
die() { printf '[llamacpp] ERROR: %s\n' "$*" >&2; exit 1; }

VERSION=0.3.36
SDIST="llama_cpp_python-$VERSION.tar.gz"
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
URL="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/$SDIST"
HOME_DIR="$CACHE/llamacpp"
mkdir -p "$HOME_DIR/src"

# The ISA key: the CPU's feature flags (GGML_NATIVE compiles for exactly these), hashed.
# engines/llamacpp/server.py computes the same key to refuse a build made for another CPU.
isa=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)
key="${SHA256:0:12}-$isa"
out="$HOME_DIR/$key"
if [ -x "$out/bin/llama-server" ] && [ -f "$out/build-info.json" ]; then
  ln -sfn "$key" "$HOME_DIR/current"
  say "llama-server already built for this source and CPU: $out/bin/llama-server"
  exit 0
fi

tarball="${LLAMACPP_SDIST:-$HOME_DIR/src/$SDIST}"
if [ ! -f "$tarball" ]; then
  say "downloading $SDIST (76.6 MB) from PyPI"
  command -v curl >/dev/null || die "curl is needed to download $SDIST"
  curl -fsSL --retry 3 --max-time 900 -o "$tarball.part" "$URL" || die "could not download $URL"
  mv "$tarball.part" "$tarball"
fi
echo "$SHA256  $tarball" | sha256sum -c --status || die "$tarball does not have sha256 $SHA256: delete it and rerun"
command -v cmake >/dev/null || die "cmake is needed (scripts/setup.sh installs it)"
command -v c++ >/dev/null || die "a C++ compiler is needed (build-essential)"

work="$HOME_DIR/.build-$key-$$"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
say "unpacking the vendored llama.cpp"
tar -xzf "$tarball" -C "$work/src" --strip-components=1 || die "could not unpack $tarball"
tree="$work/src/vendor/llama.cpp"
[ -f "$tree/tools/server/server.cpp" ] || die "no vendor/llama.cpp/tools/server in $SDIST"
commit=$(cat "$work/src/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || echo unknown)
jobs=$(nproc)
say "building llama-server and llama-bench (llama.cpp ${commit:0:12}, -j$jobs: about 5-6 min on 2 cores)"
start=$(date +%s)
# LLAMA_USE_PREBUILT_UI (on by default) would download the web UI: off, like every network feature.
if ! cmake -S "$tree" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON >"$work/cmake.log" 2>&1; then
  mkdir -p "$HOME_DIR/logs" && cp "$work/cmake.log" "$HOME_DIR/logs/"
  die "cmake failed; see $HOME_DIR/logs/cmake.log"
fi
if ! cmake --build "$work/build" --target llama-server llama-bench -j"$jobs" >"$work/make.log" 2>&1; then
  mkdir -p "$HOME_DIR/logs" && cp "$work/make.log" "$HOME_DIR/logs/"
  die "the build failed; see $HOME_DIR/logs/make.log"
fi
seconds=$(( $(date +%s) - start ))
mkdir -p "$work/out/bin"
cp "$work/build/bin/llama-server" "$work/build/bin/llama-bench" "$work/out/bin/"
version=$("$work/out/bin/llama-server" --version 2>&1 | tr '\n' ' ' | sed 's/"/'"'"'/g; s/ *$//')
cat >"$work/out/build-info.json" <<EOF
{"kind": "specdec.llamacpp-build", "sdist": "$SDIST", "sha256": "$SHA256", "llama_cpp_commit": "$commit",
 "isa": "$isa", "cpu": "$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//; s/"//g')",
 "flags": "-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON",
 "version": "$version", "build_seconds": $seconds, "jobs": $jobs}
EOF
rm -rf "$out" && mv "$work/out" "$out"
ln -sfn "$key" "$HOME_DIR/current"
say "built in ${seconds} s: $out/bin/llama-server ($version)"
