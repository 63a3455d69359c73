#!/usr/bin/env bash
# Fetches the tree-sitter grammars Engram parses with from PyPI into third_party/grammars/: pip
# downloads each source distribution alone (no dependencies, nothing built or installed), its
# sha256 is checked against the one pinned here, and only its src/ (parser.c, scanner.c) and
# license are unpacked. The grammars' sources include "tree_sitter/parser.h", "alloc.h" and
# "array.h" (and array.h "ts_assert.h"), which these distributions do not ship: they come from tree-sitter's own source
# distribution (the py-tree-sitter 0.23.2 package, whose core is tree-sitter 0.23, the generator
# of these parsers), unpacked into third_party/grammars/include/tree_sitter/.
# These versions have LANGUAGE_VERSION 14; later ones (tree-sitter-python 0.25, tree-sitter-c
# 0.23.5 and up) are ABI 15, which Debian 12's runtime (libtree-sitter 0.20.7, ABI 13-14) refuses.
# pip reads each distribution's metadata with the pinned environment's setuptools
# (--no-build-isolation: nothing unpinned is downloaded), so scripts/install-deps.sh runs first.
# Idempotent: a grammar already unpacked at its pinned version and hash is left alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/third_party/grammars
source "$root/scripts/python/env.sh"
if [ ! -x "$ENGRAM_PY" ]; then
  echo "fetch-grammars: no Python environment at $ENGRAM_VENV: run scripts/install-deps.sh" >&2
  exit 1
fi
tmp=""
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT
# name version sha256-of-the-sdist folder-it-unpacks-into what-to-unpack
sources=(
  "tree-sitter-python 0.23.6 354bfa0a2f9217431764a631516f85173e9711af2c13dbd796a8815acfe505d9 tree-sitter-python grammar"
  "tree-sitter-c 0.23.4 9215c7888dd019038f162ea5646178f6e129cd2b49fc506d14becf5e426121d7 tree-sitter-c grammar"
  "tree-sitter-cpp 0.23.4 6a59c4cebb1ad1dc2e8d586cf8a72b39d21b8108b7b139d089719e81a339e41d tree-sitter-cpp grammar"
  "tree-sitter 0.23.2 66bae8dd47f1fed7bdef816115146d3a41c39b5c482d7bad36d9ba1def088450 include headers"
)
fetched=0
for entry in "${sources[@]}"; do
  read -r name version sha256 folder what <<< "$entry"
  dir=$dest/$folder
  pin="$name $version sha256:$sha256"
  if [ "$what" = grammar ]; then present=$dir/src/parser.c; else present=$dir/tree_sitter/parser.h; fi
  if [ -f "$dir/.engram-pin" ] && [ "$(cat "$dir/.engram-pin")" = "$pin" ] && [ -f "$present" ]; then
    continue
  fi
  tmp=$(mktemp -d)
  echo "$name==$version --hash=sha256:$sha256" > "$tmp/requirement.txt"
  if ! "$ENGRAM_PY" -m pip download --quiet --no-input --disable-pip-version-check \
    --no-deps --no-binary :all: --no-build-isolation --require-hashes \
    -r "$tmp/requirement.txt" -d "$tmp" \
    > "$tmp/pip.log" 2>&1; then
    echo "fetch-grammars: pip download $name==$version (sha256 $sha256) failed:" >&2
    tail -15 "$tmp/pip.log" >&2
    exit 1
  fi
  tarball=$(ls "$tmp"/*.tar.gz)
  # pip checked the hash; checked again here so that this script never trusts a cache silently.
  if [ "$(sha256sum "$tarball" | cut -d' ' -f1)" != "$sha256" ]; then
    echo "fetch-grammars: $tarball does not have sha256 $sha256" >&2
    exit 1
  fi
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  if [ "$what" = grammar ]; then
    tar -xzf "$tarball" -C "$dir.partial" --strip-components=1 --wildcards '*/src/*' '*/LICENSE'
  else
    top=$(basename "$tarball" .tar.gz)
    mkdir -p "$dir.partial/tree_sitter"
    tar -xzf "$tarball" -C "$dir.partial/tree_sitter" --strip-components=5 \
      "$top/tree_sitter/core/lib/src/parser.h" "$top/tree_sitter/core/lib/src/alloc.h" \
      "$top/tree_sitter/core/lib/src/array.h" "$top/tree_sitter/core/lib/src/ts_assert.h"
    tar -xzf "$tarball" -C "$dir.partial" --strip-components=1 "$top/LICENSE"
  fi
  echo "$pin" > "$dir.partial/.engram-pin"
  rm -rf "$dir" "$tmp"
  tmp=""
  mv "$dir.partial" "$dir"
  fetched=$((fetched + 1))
done
echo "fetch-grammars: ${#sources[@]} sources pinned by sha256, $fetched fetched from PyPI"
