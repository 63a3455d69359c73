# Sourced by the scripts that build with or use Engram's Python environment (install-deps.sh,
# build.sh, sanitize.sh, fuzz.sh, the notebooks, the reproduce scripts): sets ENGRAM_VENV, the
# environment's folder (an absolute path), and ENGRAM_PY, its python, and puts the machine's nvcc
# (/usr/local/cuda/bin) on PATH where it is not there already. The folder lives outside the clone,
# keyed by the pinned torch and a digest of requirements.lock, so every clone on a machine shares
# one environment and a change of any pin makes a new one. ENGRAM_VENV set beforehand overrides
# the folder; XDG_CACHE_HOME moves the default (~/.cache).
engram_python_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
engram_lock_digest=$(sha256sum "$engram_python_dir/requirements.lock" | cut -c1-12)
engram_torch_pin=$(sed -n 's/^torch==\([^ ]*\) .*/\1/p' "$engram_python_dir/requirements.lock")
ENGRAM_VENV=${ENGRAM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/engram/python-torch$engram_torch_pin-$engram_lock_digest}
case $ENGRAM_VENV in
  /*) ;;
  *) ENGRAM_VENV=$PWD/$ENGRAM_VENV ;;
esac
ENGRAM_PY=$ENGRAM_VENV/bin/python
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
export ENGRAM_VENV ENGRAM_PY
