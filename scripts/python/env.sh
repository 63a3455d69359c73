# Sourced by the scripts that use Engram's Python environment (install-deps.sh, build.sh, the
# notebooks, the reproduce scripts): sets ENGRAM_VENV, the environment's folder, and ENGRAM_PY, its
# python. The folder lives outside the clone, keyed by the pinned torch and a digest of
# requirements.lock, so every clone on a machine shares one environment and a change of any pin
# makes a new one. ENGRAM_VENV set beforehand overrides the folder.
engram_python_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
engram_lock_digest=$(sha256sum "$engram_python_dir/requirements.lock" | cut -c1-12)
engram_torch_pin=$(sed -n 's/^torch==\([^ ]*\) .*/\1/p' "$engram_python_dir/requirements.lock")
ENGRAM_VENV=${ENGRAM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/engram/python-torch$engram_torch_pin-$engram_lock_digest}
ENGRAM_PY=$ENGRAM_VENV/bin/python
export ENGRAM_VENV ENGRAM_PY
