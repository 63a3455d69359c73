#!/usr/bin/env bash
# The README's second command: install, build, run the test suite (ctest labels unit, integration,
# claims; the long `slow` label is left to `ctest -L slow`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
ctest --test-dir "$build" -L "unit|integration|claims" --output-on-failure --parallel "$(nproc)"
