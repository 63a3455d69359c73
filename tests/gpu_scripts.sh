#!/usr/bin/env bash
# The GPU measurements' scripts (scripts/reproduce/gpu_*.sh, run by scripts/gpu-check.sh) on the
# machine at hand, --quick: where this machine has no NVIDIA driver each must stop with the
# usage error that names the missing GPU and leave no results file; where it has one, each must
# write its JSON naming the device.
# Usage: gpu_scripts.sh ENGRAM_BINARY SCRATCH_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export ENGRAM_BIN=$1 ENGRAM_REPRO_ANY_BINARY=1
scratch=$2/gpu_scripts
rm -rf "$scratch"
mkdir -p "$scratch"
status=0
for script in gpu_memory_resnet.sh gpu_memory_resnet50.sh gpu_npi_addition.sh gpu_ooo_streams.sh \
    gpu_memory_cap.sh; do
  out=$scratch/${script%.sh}.json
  bash "$root/scripts/reproduce/$script" --quick --out "$out" > "$scratch/out.txt" 2> "$scratch/err.txt"
  rc=$?
  if [ -e /dev/nvidiactl ]; then
    if [ $rc -ne 0 ] || ! grep -q '"gpu"' "$out" 2> /dev/null; then
      echo "$script: exit $rc on a GPU machine, or no device named in $out:"; cat "$scratch/err.txt"
      status=1
    fi
  else
    if [ $rc -eq 0 ] || [ -e "$out" ] || ! grep -q "no CUDA device is visible" "$scratch/err.txt"; then
      echo "$script: exit $rc without a GPU (expected a failure naming the missing GPU, no file):"
      cat "$scratch/err.txt"
      status=1
    fi
  fi
done
exit $status
