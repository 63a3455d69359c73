#!/usr/bin/env bash
# Installs dependencies and fetches the grammars (both idempotent), then builds Engram into build/
# (or $ENGRAM_BUILD_DIR) against the LibTorch of the pinned Python environment (scripts/python/).
# Extra arguments are passed to CMake, e.g. scripts/build.sh -DENGRAM_ASAN=ON
# ENGRAM_TARGETS (space-separated) builds only those targets, e.g. ENGRAM_TARGETS=engram for the
# demo (scripts/demo.sh): the test executables are most of the compile time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/fetch-grammars.sh"
source "$root/scripts/python/env.sh"  # ENGRAM_PY, and nvcc on PATH
# ccache (installed by install-deps.sh) with paths relative to the clone: a fresh clone elsewhere
# on the same machine, as CI's, reuses what an earlier build compiled.
launchers=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR=$root
  launchers=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
             -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DENGRAM_PYTHON="$ENGRAM_PY" \
  "${launchers[@]}" "$@"
targets=()
for t in ${ENGRAM_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
