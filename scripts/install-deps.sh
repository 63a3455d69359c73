#!/usr/bin/env bash
# Installs every system dependency of Engram on Debian 12.
# Idempotent: packages already present are left alone, so re-running is cheap.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libgloo-dev libopenblas0-pthread libopenblas-dev
  libboost-graph-dev libtree-sitter-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  python3-torch python3-numpy
  jupyter-nbconvert python3-nbclient python3-nbformat python3-ipykernel python3-matplotlib
  clang-format clang-tidy
)

# npm fetches the tree-sitter grammars (scripts/fetch-grammars.sh). A machine whose Node.js came
# from elsewhere already has npm; Debian's npm package would conflict with it.
if ! command -v npm > /dev/null; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
