#!/usr/bin/env bash
# The README's first command: install, build the engram binary (only what the demo needs; the
# second command, scripts/test.sh, builds the rest), run `engram demo`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENGRAM_TARGETS=engram bash "$root/scripts/build.sh"
"${ENGRAM_BUILD_DIR:-$root/build}/cli/engram" demo "$@"
