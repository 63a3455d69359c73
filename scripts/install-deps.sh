#!/usr/bin/env bash
# Installs every dependency of Engram on Debian 12, one line per step:
#   1. Debian's packages: the compilers, CMake, and the C++ libraries the build links besides
#      LibTorch (tree-sitter's runtime, Boost.Graph, GoogleTest, CLI11, nlohmann-json, Gloo's
#      headers), plus python3-venv and python3-pip (fetch-grammars.sh downloads with pip).
#   2. The Python environment (scripts/python/env.sh says where): the pinned torch wheel from PyPI,
#      which brings LibTorch with CUDA 13.0, c10d with NCCL, cuDNN and cuBLAS, torchrun, and what
#      the peers and notebooks import; every package pinned with its hash in
#      scripts/python/requirements.lock.
# The CUDA compiler (nvcc 13.0) is the machine's: the project's machines have it in /usr/local/cuda.
# Idempotent: a step whose result is present is left alone, so re-running is cheap.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libgloo-dev libboost-graph-dev libtree-sitter-dev
  googletest libgtest-dev libgmock-dev
  libcli11-dev nlohmann-json3-dev
  python3 python3-venv python3-pip
  clang-format clang-tidy
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: Debian packages: all ${#packages[@]} present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
  echo "install-deps: Debian packages: installed ${missing[*]}"
fi

source "$root/scripts/python/env.sh"
lock=$root/scripts/python/requirements.lock
marker=$ENGRAM_VENV/.engram-lock
if [ -f "$marker" ] && cmp -s "$marker" "$lock"; then
  echo "install-deps: Python environment: present in $ENGRAM_VENV"
else
  # A folder of ours without the marker is an interrupted install: start it again. A virtual
  # environment cannot be moved once made, so it is built in place and marked complete last.
  # Anything else at that path (ENGRAM_VENV naming another folder) is left alone.
  if [ -e "$ENGRAM_VENV" ] && [ ! -f "$ENGRAM_VENV/.engram-install.log" ] &&
    [ -n "$(ls -A "$ENGRAM_VENV" 2> /dev/null || echo not-a-folder)" ]; then
    echo "install-deps: $ENGRAM_VENV exists and is not an Engram environment; remove it or set" \
      "ENGRAM_VENV to another folder" >&2
    exit 2
  fi
  start=$(date +%s)
  rm -rf "$ENGRAM_VENV"
  mkdir -p "$ENGRAM_VENV"
  log=$ENGRAM_VENV/.engram-install.log
  : > "$log"
  /usr/bin/python3 -m venv "$ENGRAM_VENV"
  if ! "$ENGRAM_PY" -m pip install --quiet --no-input --disable-pip-version-check \
    --require-hashes --no-deps --only-binary :all: -r "$lock" > "$log" 2>&1; then
    echo "install-deps: pip could not install $lock into $ENGRAM_VENV:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  cp "$lock" "$marker"
  echo "install-deps: Python environment: created $ENGRAM_VENV in $(($(date +%s) - start)) s"
fi
