#!/usr/bin/env bash
# The checks that need a GPU machine, as one bounded run (docs/USAGE.md, "On a GPU machine"): on a
# machine with nvcc and the PyTorch wheel Engram pins (torch 2.11 with CUDA 13.0; no apt, no
# network), with third_party/ carried from Debian 12 (scripts/bundle-deps.sh: the Debian packages
# the wheel lacks, and the grammars), it
#   1. reports the machine (nvidia-smi, torch, its CUDA and C++ ABI, nvcc, the compiler),
#   2. unpacks the bundle and configures build-gpu/ against the LibTorch of the machine's python3,
#   3. builds the CUDA kernels' test and benchmark first and runs them (the test compares the
#      CUDA kernels with the CPU kernels bit for bit; scripts/reproduce/relu_cuda.sh writes the
#      benchmark's JSON), then the same for cuDNN's convolution algorithms (nn/cuda/: every
#      algorithm against a direct convolution; scripts/reproduce/cudnn_conv.sh),
#   4. builds everything else (ninja -k 0: every compile error in one log) and runs the unit, then
#      the integration tests,
# each stage within what is left of a deadline, so that the run ends, with its logs, before the
# machine's limit. Logs and results go to DIR ($OUT where the device tool sets it).
#   scripts/gpu-check.sh [--out DIR] [--deadline SECONDS] [--prefix DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/check}
deadline=450
prefix=/tmp/engram-prefix
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --deadline) deadline=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    *) echo "usage: $0 [--out DIR] [--deadline SECONDS] [--prefix DIR]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
start=$(date +%s)
log=$out/gpu-check.log
: > "$log"
say() { echo "gpu-check [$(( $(date +%s) - start ))s]: $*" | tee -a "$log"; }
left() { echo $(( deadline - ($(date +%s) - start) )); }
# stage NAME SECONDS CMD...: runs CMD with at most SECONDS (and what is left), logs, reports.
stage() {
  local name=$1 limit=$2
  shift 2
  local budget
  budget=$(left)
  [ "$limit" -lt "$budget" ] && budget=$limit
  if [ "$budget" -le 5 ]; then
    say "$name: skipped, no time left"
    return 124
  fi
  say "$name (at most ${budget}s): $*"
  timeout --kill-after=5 "$budget" "$@" >> "$log" 2>&1
  local rc=$?
  say "$name: exit $rc"
  return $rc
}

say "machine"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "cudnn", torch.backends.cudnn.version(), "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI,
    "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'
  nvcc --version | tail -2
  c++ --version | head -1
  cmake --version | head -1
  nproc
} >> "$log" 2>&1

stage unpack 120 bash "$root/scripts/unpack-deps.sh" "$prefix" || exit 1
export PATH=$prefix/bin:$PATH
jobs=$(nproc)

# A C++ compiler whose programs load the shared libstdc++: one that links libstdc++ statically
# (the image's default c++ did, 2026-11-27) leaves two C++ runtimes in one process, LibTorch's
# and ours, and every command crashed. The first of the candidates whose probe program needs
# libstdc++.so is used for C++ and as nvcc's host compiler.
probe_dir=$(mktemp -d)
printf '#include <filesystem>\nint main() { return std::filesystem::exists("/") ? 0 : 1; }\n' \
  > "$probe_dir/probe.cpp"
compiler=
cc=
for pair in c++:cc g++:gcc /usr/bin/g++:/usr/bin/gcc /usr/bin/g++-13:/usr/bin/gcc-13 \
    /usr/bin/g++-14:/usr/bin/gcc-14 /usr/bin/g++-12:/usr/bin/gcc-12 clang++:clang; do
  cxx=${pair%%:*}
  command -v "$cxx" > /dev/null 2>&1 && command -v "${pair#*:}" > /dev/null 2>&1 || continue
  if "$cxx" "$probe_dir/probe.cpp" -o "$probe_dir/probe" >> "$log" 2>&1 &&
     readelf -d "$probe_dir/probe" | grep -q 'NEEDED.*libstdc++\.so'; then
    compiler=$(command -v "$cxx")
    cc=$(command -v "${pair#*:}")
    break
  fi
  say "compiler $cxx ($(readlink -f "$(command -v "$cxx")")) links libstdc++ statically: not used"
done
rm -rf "$probe_dir"
link_flags=()
if [ -z "$compiler" ]; then
  # None does: name the shared libstdc++ on every link line, ahead of the static one.
  compiler=$(command -v c++)
  cc=$(command -v cc)
  libstdcxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ { print $NF; exit }')
  [ -n "$libstdcxx" ] || { say "no shared libstdc++ on this machine"; exit 1; }
  link_flags=(-DCMAKE_EXE_LINKER_FLAGS="$libstdcxx" -DCMAKE_SHARED_LINKER_FLAGS="$libstdcxx")
fi
say "compilers: $compiler, $cc ${link_flags[*]}"

stage configure 180 cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CUDA_HOST_COMPILER="$compiler" "${link_flags[@]}" \
  -DENGRAM_PYTHON="$(command -v python3)" -DENGRAM_DEPS_PREFIX="$prefix" \
  -DCMAKE_CUDA_ARCHITECTURES=90 || exit 1

if stage build-cuda 300 ninja -C "$root/build-gpu" -j "$jobs" engram_tests_memory_cuda \
  engram_relu_cuda_bench; then
  stage test-cuda 120 "$root/build-gpu/tests/memory/engram_tests_memory_cuda" \
    --gtest_output="xml:$out/cuda-test.xml"
  ENGRAM_RELU_CUDA_BENCH=$root/build-gpu/bench/engram_relu_cuda_bench \
    stage bench-cuda 120 bash "$root/scripts/reproduce/relu_cuda.sh" --out "$out/gpu_relu_cuda.json"
fi
# cuDNN's convolution algorithms (where CMake found cuDNN): their test (no torch: quick to
# build), then their benchmark (which needs the ResNet, so torch).
if stage build-cudnn-test 120 ninja -C "$root/build-gpu" -j "$jobs" engram_tests_nn_cudnn; then
  stage test-cudnn 180 "$root/build-gpu/tests/nn/engram_tests_nn_cudnn" \
    --gtest_output="xml:$out/cudnn-test.xml"
fi
if stage build-cudnn-bench 300 ninja -C "$root/build-gpu" -j "$jobs" engram_cudnn_conv_bench; then
  ENGRAM_CUDNN_CONV_BENCH=$root/build-gpu/bench/engram_cudnn_conv_bench \
    stage bench-cudnn 240 bash "$root/scripts/reproduce/cudnn_conv.sh" --out "$out/gpu_cudnn_conv.json"
fi

# Everything else: every error at once, the tail of the errors in their own file.
stage build-all 600 ninja -C "$root/build-gpu" -j "$jobs" -k 0
build_rc=$?
grep -E -A6 "error:|FAILED:" "$log" | head -400 > "$out/build-errors.log"
if [ $build_rc -eq 0 ]; then
  # Without the notebooks' tests: the GPU machine's python3 has no matplotlib, and the notebooks
  # draw committed results on the CPU (CI runs them).
  stage ctest-unit 600 ctest --test-dir "$root/build-gpu" -L unit -E '^notebooks_' -j "$jobs" \
    --timeout 120 --output-on-failure
  stage ctest-integration 600 ctest --test-dir "$root/build-gpu" -L integration \
    -E '^notebooks_' -j "$jobs" --timeout 300 --output-on-failure
  grep -E "tests passed|Failed|\*\*\*|Not Run|ctest-" "$log" | tail -80 > "$out/ctest-summary.log"
fi
say "done"
