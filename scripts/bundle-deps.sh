#!/usr/bin/env bash
# Gathers, as .deb files, every package the build needs except LibTorch, for a machine that has a
# compiler and cmake but no package manager or network (a GPU machine with a PyTorch wheel, which
# brings its own LibTorch). Runs on Debian 12 (apt-get download needs no root). The .debs, with
# the Debian dependencies they pull in (except the C/C++ toolchain's own: libc6, libstdc++6, ...),
# go to third_party/deps/ (ignored by git, like the tree-sitter grammars in third_party/grammars/,
# which this script also fetches). Carry third_party/ to the other machine and unpack there with
# scripts/unpack-deps.sh (docs/USAGE.md, "On a GPU machine").
#   scripts/bundle-deps.sh [DEST]      default DEST: third_party/deps
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/third_party/deps}

# What the build finds (CMakeLists.txt, tests/CMakeLists.txt, memory/CMakeLists.txt):
#   tree-sitter (pkg-config), nlohmann_json, CLI11, GTest, Boost headers (Boost.Graph), Gloo's
#   headers (a pip LibTorch links Gloo into libtorch_cpu but ships no gloo/*.h, which
#   c10d/ProcessGroupGloo.hpp includes; Engram holds Gloo's types only through pointers and never
#   calls into Gloo, which tests/gloo_headers.sh checks); plus pkg-config and ninja
#   (scripts/build.sh configures with -G Ninja). Not bundled: google benchmark, fmt, spdlog
#   (nothing in the build uses them).
roots=(
  libtree-sitter-dev nlohmann-json3-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libboost1.74-dev libgloo-dev
  pkgconf ninja-build
)
# Part of any machine with a C++ compiler; a compiler-specific -dev package would be wrong there.
toolchain=" libc6 libc6-dev libgcc-s1 libstdc++6 libstdc++-12-dev gcc-12-base libgcc-12-dev "

# Resolve Depends and Pre-Depends recursively (the first alternative of each).
declare -A seen=()
queue=("${roots[@]}")
while [ ${#queue[@]} -gt 0 ]; do
  p=${queue[0]}
  queue=("${queue[@]:1}")
  [ -n "${seen[$p]:-}" ] && continue
  [[ $toolchain == *" $p "* ]] && continue
  seen[$p]=1
  while read -r dep; do
    [ -n "$dep" ] && queue+=("$dep")
  done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
             --no-replaces --no-enhances "$p" |
           awk '/^ *\|?(Pre)?Depends:/ { if (!alt) print $2; alt = ($1 ~ /^\|/) }' |
           sed 's/:any$//' | tr -d '<>')
done
packages=("${!seen[@]}")

# Into a folder beside DEST, which replaces DEST only once every package is there: a download
# that fails leaves the bundle that was there whole.
mkdir -p "$(dirname "$dest")"
dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")
building=$(mktemp -d "$dest.XXXXXX")
chmod 755 "$building"  # mktemp's 0700 would travel with the bundle
trap 'rm -rf "$building"' EXIT
cd "$building"
for p in "${packages[@]}"; do
  version=$(apt-cache policy "$p" | awk '/Candidate:/ { print $2 }')
  file=$(apt-get download --print-uris "$p" 2> /dev/null | awk '{ print $2 }')
  # Reuse the bundle's or apt's copy where either holds the same file; otherwise download it.
  if [ -n "$file" ] && [ -f "$dest/$file" ]; then
    cp "$dest/$file" .
  elif [ -n "$file" ] && [ -f "/var/cache/apt/archives/$file" ]; then
    cp "/var/cache/apt/archives/$file" .
  else
    apt-get download -qq "$p"
  fi
  echo "$p $version" >> MANIFEST
done
sort -o MANIFEST MANIFEST
cd "$root"
rm -rf "$dest"
mv "$building" "$dest"
trap - EXIT

bash "$root/scripts/fetch-grammars.sh"
echo "bundle-deps: ${#packages[@]} packages in $dest ($(du -sh "$dest" | cut -f1));" \
     "with the grammars: $(du -shc "$dest" "$root/third_party/grammars" | tail -1 | cut -f1)"
