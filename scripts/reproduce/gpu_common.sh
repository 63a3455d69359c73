# Sourced by the GPU benchmarks' scripts (relu_cuda.sh, cudnn_conv.sh) after they set
#   name=NAME          the script's name; its results file: results/gpu_NAME.json
#   bench=PATH         the benchmark binary (its script's ENGRAM_..._BENCH, or build/bench/...)
# Parses [--out FILE.json], checks that the binary is built, and sets root, out and commit
# (ENGRAM_REPRO_COMMIT where the tree has no .git). run_gpu_bench ARGS... runs the benchmark with
# --json OUT.partial and ARGS, then gpu_result.py turns the partial report into OUT, naming the
# GPU (refused when the report says "skipped", no device, or nvidia-smi names no GPU).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/results/gpu_$name.json
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    *) echo "usage: $0 [--out FILE.json]" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -x "$bench" ]; then
  echo "$0: $bench not built (it needs nvcc, and cuDNN for the convolutions: CMakeLists.txt)" >&2
  exit 1
fi
commit=${ENGRAM_REPRO_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)}

run_gpu_bench() {
  local binary
  binary=$(basename "$bench")
  local args=(--json "$out.partial" "$@")
  echo "+ $binary ${args[*]}" >&2
  "$bench" "${args[@]}"
  python3 "$root/scripts/reproduce/gpu_result.py" "$out" "$commit" "scripts/reproduce/$name.sh" \
    "$binary ${args[*]}"
  echo "wrote $out"
}
