#!/usr/bin/env bash
# The README's second command: install, build, run the test suite (ctest labels unit, integration).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
ctest --test-dir "$build" -L "unit|integration" --output-on-failure --parallel "$(nproc)"
