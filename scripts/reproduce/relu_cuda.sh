#!/usr/bin/env bash
# Claim (ReLU compression on a GPU): the CUDA kernels (memory/cuda/) compress and decompress a
# tensor of 8M floats at sparsities 0, 0.5 and 0.9, every round trip checked bit for bit, and
# their throughput against a device-to-device cudaMemcpy of the same dense bytes, each the median
# of 20 runs timed with CUDA events. Runs on a GPU machine (scripts/gpu-check.sh runs it there);
# without a device it fails and leaves the results file alone. Writes results/relu_cuda.json (--out FILE:
# there), with the commit (ENGRAM_REPRO_COMMIT where the tree has no .git), the command and the
# machine (GPU, driver, CPU) inside.
#   ENGRAM_RELU_CUDA_BENCH=PATH   the benchmark binary (default build/bench/engram_relu_cuda_bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bench=${ENGRAM_RELU_CUDA_BENCH:-$root/build/bench/engram_relu_cuda_bench}
out=$root/results/relu_cuda.json
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    *) echo "usage: $0 [--out FILE.json]" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -x "$bench" ]; then
  echo "$0: $bench not built (it needs nvcc: CMakeLists.txt, ENGRAM_CUDA)" >&2
  exit 1
fi
commit=${ENGRAM_REPRO_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)}
args=(--json "$out.partial" --elements 8388608 --repeats 20)
echo "+ engram_relu_cuda_bench ${args[*]}" >&2
"$bench" "${args[@]}"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null |
  head -1 || true)
python3 - "$out" "$commit" "$gpu" "${args[*]}" << 'PY'
import json, os, platform, sys
out, commit, gpu, args = sys.argv[1:5]
with open(out + ".partial") as f:
    report = json.load(f)
os.remove(out + ".partial")
if report.get("skipped"):
    sys.exit(f"relu_cuda.sh: no GPU here ({report.get('reason')}); {out} left as it was")
cpu = ""
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
report["reproduce"] = {
    "script": "scripts/reproduce/relu_cuda.sh", "commit": commit,
    "commands": ["engram_relu_cuda_bench " + args.replace(out + ".partial", "relu_cuda.json")],
    "machine": {"gpu": gpu, "cpu": cpu, "cores": os.cpu_count(), "system": platform.platform()}}
with open(out + ".tmp", "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
os.replace(out + ".tmp", out)
PY
echo "wrote $out"
