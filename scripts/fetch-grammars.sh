#!/usr/bin/env bash
# Fetches the tree-sitter grammars Engram parses with from the npm registry
# into third_party/grammars/NAME: `npm pack` downloads the tarball alone (no install scripts, no
# node addon), its sha512 is checked against the integrity hash pinned here, and only the sources
# CMake compiles (src/parser.c, src/scanner.c, headers) and the license are unpacked.
# These versions have LANGUAGE_VERSION 14; newer ones are ABI 15, which Debian 12's runtime
# (libtree-sitter 0.20.7, ABI 13-14) refuses.
# Idempotent: a grammar already unpacked at its pinned version and hash is left alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/third_party/grammars
grammars=(
  "tree-sitter-python 0.23.6 sha512-yIM9z0oxKIxT7bAtPOhgoVl6gTXlmlIhue7liFT4oBPF/lha7Ha4dQBS82Av6hMMRZoVnFJI8M6mL+SwWoLD3A=="
  "tree-sitter-c 0.23.6 sha512-0dxXKznVyUA0s6PjNolJNs2yF87O5aL538A/eR6njA5oqX3C3vH4vnx3QdOKwuUdpKEcFdHuiDpRKLLCA/tjvQ=="
  "tree-sitter-cpp 0.23.4 sha512-qR5qUDyhZ5jJ6V8/umiBxokRbe89bCGmcq/dk94wI4kN86qfdV8k0GHIUEKaqWgcu42wKal5E97LKpLeVW8sKw=="
)
for entry in "${grammars[@]}"; do
  read -r name version integrity <<< "$entry"
  dir=$dest/$name
  pin="$version $integrity"
  if [ -f "$dir/.engram-pin" ] && [ "$(cat "$dir/.engram-pin")" = "$pin" ]; then
    continue
  fi
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent --ignore-scripts "$name@$version" > /dev/null 2> "$tmp/npm.log") || {
    echo "fetch-grammars: npm pack $name@$version failed:" >&2
    cat "$tmp/npm.log" >&2
    exit 1
  }
  tarball=$tmp/$name-$version.tgz
  actual=$(/usr/bin/python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")
  if [ "$actual" != "$integrity" ]; then
    echo "fetch-grammars: $name@$version has integrity $actual, expected $integrity" >&2
    rm -rf "$tmp"
    exit 1
  fi
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  tar -xzf "$tarball" -C "$dir.partial" --strip-components=1 --wildcards \
    'package/src/*' 'package/LICENSE*' 'package/package.json'
  echo "$pin" > "$dir.partial/.engram-pin"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
  rm -rf "$tmp"
  echo "fetch-grammars: $name@$version"
done
