#!/usr/bin/env bash
# The README's first command: install, build, run `engram demo`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
"${ENGRAM_BUILD_DIR:-$root/build}/cli/engram" demo "$@"
