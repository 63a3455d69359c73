#!/usr/bin/env bash
# Installs dependencies and fetches the grammars (both idempotent), then builds Engram into build/ (or $ENGRAM_BUILD_DIR).
# Extra arguments are passed to CMake, e.g. scripts/build.sh -DENGRAM_ASAN=ON
# ENGRAM_TARGETS (space-separated) builds only those targets, e.g. ENGRAM_TARGETS=engram for the
# demo (scripts/demo.sh): the test executables are most of the compile time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/fetch-grammars.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
targets=()
for t in ${ENGRAM_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
