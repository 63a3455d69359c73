#!/usr/bin/env bash
# The README's first command: install, build the engram binary (only what the demo needs; the
# second command, scripts/test.sh, builds the rest), install it into a prefix on the PATH
# ($ENGRAM_PREFIX, default ~/.local: the binary goes to ~/.local/bin), run `engram demo`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_BUILD_DIR:-$root/build}
prefix=${ENGRAM_PREFIX:-$HOME/.local}
ENGRAM_TARGETS=engram bash "$root/scripts/build.sh"
cmake --install "$build" --prefix "$prefix" > /dev/null
echo "demo: installed $prefix/bin/engram"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "demo: $prefix/bin is not on your PATH; add it: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
"$prefix/bin/engram" demo "$@"
