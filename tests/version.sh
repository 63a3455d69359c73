#!/usr/bin/env bash
# version.sh ENGRAM: the platform every build is on. `engram --version` names a 12-digit commit,
# LibTorch 2.x, CUDA 13 (LibTorch's and Engram's CUDA sources' alike), cuDNN 9 and NCCL 2 both
# compiled in and loaded, and which GPUs are visible (here or not); the binary needs libtorch_cuda
# and never Debian's libgloo.
set -uo pipefail
engram=$1
out=$("$engram" --version) || { echo "FAIL: engram --version exited $?"; exit 1; }
echo "$out"
fail=0
expect() {
  echo "$out" | grep -Eq "$1" || { echo "FAIL: no line matching '$1'"; fail=1; }
}
expect '^engram [0-9a-f]{12}(-dirty)?$|^engram unknown'
expect '^libtorch: 2\.[0-9]+\.[0-9]+$'
expect '^cuda: 13\.[0-9]+ \(libtorch\), 13\.[0-9]+ \(engram.s CUDA sources\)$'
expect '^cudnn: 9\.[0-9]+\.[0-9]+ \(libtorch\), 9\.[0-9]+\.[0-9]+ \(engram.s CUDA sources\)$'
expect '^nccl: 2\.[0-9]+\.[0-9]+ \(libtorch\), 2\.[0-9]+\.[0-9]+ \(headers\)$'
expect '^gpus visible: ([1-9][0-9]* \(cuda:0 .*\)|none( \(.*\))?)$'
needed=$(readelf -d "$engram" | grep NEEDED)
echo "$needed" | grep -q 'libtorch_cuda\.so' || { echo "FAIL: engram does not need libtorch_cuda"; fail=1; }
exit $fail
