#!/usr/bin/env bash
# The checks that need a GPU machine, as one bounded run (docs/USAGE.md, "On a GPU machine"): on a
# machine with nvcc and the PyTorch wheel Engram pins (torch 2.11 with CUDA 13.0; no apt, no
# network), with third_party/ carried from Debian 12 (scripts/bundle-deps.sh: the Debian packages
# the wheel lacks, and the grammars), it
#   1. reports the machine (nvidia-smi, torch, its CUDA and C++ ABI, nvcc, the compiler),
#   2. unpacks the bundle, picks a compiler that links the shared libstdc++ and configures
#      build-gpu/ against the LibTorch of the machine's python3,
#   3. builds what the GPU checks need first (engram and the test executables holding them),
#   4. runs the CUDA kernels' test (bit for bit against the CPU kernels) and cuDNN's algorithms'
#      test (nn/cuda/: every algorithm against a direct convolution), then every test that needs
#      a GPU (gpu_tests.json, from their XML reports by scripts/reproduce/gpu_tests.py: each
#      test's status and what it printed; each model's CUDA run against the CPU's, with the largest
#      differences; the CUDA memory tracker against the allocator's own counts; determinism;
#      data parallelism on the GPU: a one-rank NCCL job against the plain process, two ranks
#      sharing the GPU over Gloo against one process, the schedules bit-identical, the weight
#      gradients on a second stream bit-identical to one; NCCL on every GPU where there are two),
#   5. measures on the GPU, what has no committed result first: gpu_ooo_streams.sh (`bench
#      streams`: the weight gradients on a second CUDA stream against one, ResNet-18 and
#      ResNet-50, beside the step model) and `bench scale` on it (into the log),
#      gpu_memory_cap.sh (`bench memory --device cuda --memory-cap 8GiB --find-max-batch`:
#      ResNet-50's largest batch under the cap per technique, beside PyTorch eager and
#      checkpointing under the same cap), gpu_memory_resnet50.sh (`bench memory --device cuda`,
#      ResNet-50 at 224x224, batch 64 and 128, beside PyTorch eager), `bench dp` on the device
#      (two ranks sharing the GPU over Gloo; into the log), on a machine with two GPUs or more
#      gpu_dp_nccl.sh (NCCL on every GPU, one rank each, the schedules beside DDP), then
#      gpu_memory_resnet.sh (ResNet-18 at batch 32 and 256) and gpu_npi_addition.sh (addition
#      trained and evaluated on the GPU),
#   6. builds the rest (ninja -k 0: every compile error in one log), runs the unit, then the
#      integration tests, and last the kernel benchmarks (relu_cuda.sh, cudnn_conv.sh), whose
#      code changes least,
# each stage within what is left of a deadline, so that the run ends, with its logs, before the
# machine's limit (a stage that would get less than it needs is skipped; gpu_memory_cap.sh stops
# its own search in time and writes what it found). Logs and results go to DIR ($OUT where the
# device tool sets it). --stages NAME,... runs only those stages after the build of what the GPU
# checks need (on a machine still warm from a run cut short by its deadline: what that run left
# out, say --stages memory-cap,memory-resnet50).
#   scripts/gpu-check.sh [--out DIR] [--deadline SECONDS] [--prefix DIR] [--stages NAME,...]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/check}
deadline=450
prefix=/tmp/engram-prefix
only=""  # ",NAME,...,": the stages --stages names; empty: every stage
# The tests that train or measure on a GPU (each skips, saying why, without one).
device_tests='OnCuda|DeviceTest|CudaMemoryTracker|LstmDevice|OptimizerDevice|Gpu|SecondCudaStream'
# Tests those names catch that need no GPU, in executables build-device leaves for build-all.
not_device_tests='ScalingModelTest|EngramBinaryTest'

while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --deadline) deadline=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    --stages) only=",$2,"; shift ;;
    *) echo "usage: $0 [--out DIR] [--deadline SECONDS] [--prefix DIR] [--stages NAME,...]" >&2
       exit 2 ;;
  esac
  shift
done
stages="unpack configure build-device test-cuda test-cudnn test-device ooo-streams scale memory-cap
  memory-resnet50 dp-device dp-nccl memory-resnet npi-addition build-all ctest-unit
  ctest-integration bench-cuda bench-cudnn"
for name in ${only//,/ }; do
  [[ " $(echo $stages) " == *" $name "* ]] ||
    { echo "gpu-check: no stage '$name'; the stages: $(echo $stages)" >&2; exit 2; }
done
# What runs on the whole build (the suite, the kernel benchmarks) needs build-all first.
if [[ "$only" =~ ,(ctest-unit|ctest-integration|bench-cuda|bench-cudnn), ]] &&
   [[ "$only" != *",build-all,"* ]]; then
  only+="build-all,"
fi
# The results name the commit of the tree they measured. A copy of the tree on another machine
# may carry an older .git of its own, whose HEAD is not this tree's: only what the caller says
# counts (collect.py asks no git either, ENGRAM_REPRO_NO_GIT).
if [ -z "${ENGRAM_REPRO_COMMIT:-}" ]; then
  echo "gpu-check: set ENGRAM_REPRO_COMMIT to the commit of this tree (git rev-parse --short=12" \
    "HEAD where it was sent from): the results record it" >&2
  exit 2
fi
export ENGRAM_REPRO_COMMIT ENGRAM_REPRO_NO_GIT=1
mkdir -p "$out"
start=$(date +%s)
log=$out/gpu-check.log
: > "$log"
say() { echo "gpu-check [$(( $(date +%s) - start ))s]: $*" | tee -a "$log"; }
left() { echo $(( deadline - ($(date +%s) - start) )); }
# budget_for SECONDS: what a stage of at most SECONDS gets of what is left.
budget_for() {
  local budget
  budget=$(left)
  [ "$1" -lt "$budget" ] && budget=$1
  echo "$budget"
}
# stage NAME SECONDS CMD...: runs CMD with at most SECONDS (and what is left), logs, reports.
# CMD sees its budget in STAGE_SECONDS (a script that can stop itself in time reads it). With
# STAGE_MIN set, a stage that would get less is skipped, leaving its time to the shorter ones
# after it (a warm machine's --stages run can take it up).
stage() {
  local name=$1 limit=$2
  shift 2
  case "$name" in unpack | configure | build-device) ;; *)
    if [ -n "$only" ] && [[ "$only" != *",$name,"* ]]; then
      say "$name: not among --stages"
      return 125
    fi ;;
  esac
  local budget
  budget=$(budget_for "$limit")
  if [ "$budget" -le 5 ]; then
    say "$name: skipped, no time left"
    return 124
  fi
  if [ "$budget" -lt "${STAGE_MIN:-0}" ]; then
    say "$name: skipped, ${budget}s left and it needs ${STAGE_MIN}s (run it with --stages $name" \
      "and a longer --deadline)"
    return 124
  fi
  say "$name (at most ${budget}s): $*"
  # The command's output into the run's log, or into STAGE_LOG where the caller names one.
  STAGE_SECONDS=$budget timeout --kill-after=5 "$budget" "$@" >> "${STAGE_LOG:-$log}" 2>&1
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
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)

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

# A warm machine's build folder stays between commands while the tree is copied anew: the
# sources unchanged since the last build get their times back, so ninja rebuilds only what
# changed.
python3 "$root/scripts/source-mtimes.py" restore "$root" "$root/build-gpu/source-mtimes.json" \
  >> "$log" 2>&1
stage configure 180 cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CUDA_HOST_COMPILER="$compiler" "${link_flags[@]}" \
  -DENGRAM_PYTHON="$(command -v python3)" -DENGRAM_DEPS_PREFIX="$prefix" \
  -DCMAKE_CUDA_ARCHITECTURES=90 || exit 1

# First what the GPU checks need (the binary, the test executables holding the tests that need a
# GPU), then those checks in the order of what they add: the CUDA kernels' and cuDNN's tests, the
# tests that train on the GPU (each model against the CPU, the tracker against the allocator's
# own counts, determinism; verbose, with their largest differences), the GPU measurements; then
# the rest of the build (ninja -k 0: every compile error in one log), the whole suite, and last
# the kernel benchmarks, whose code changes least. Eight files at most come back from $OUT:
# gpu-check.log (build errors and the suite's summary at its end), gpu_tests.json (the GPU tests'
# outcomes and output; device-tests.log in its place where no report was written) and six
# results files (gpu_relu_cuda.json stays on the machine, its table in the log, and so does
# gpu_cudnn_conv.json where gpu_dp_nccl.json was written: a machine with two GPUs or more).
bin=$root/build-gpu
stage build-device 300 ninja -C "$bin" -j "$jobs" engram engram_tests_trainer engram_tests_nn \
  engram_tests_memory engram_tests_npi engram_tests_primitives engram_tests_tbcnn \
  engram_tests_resnet engram_tests_memory_cuda engram_tests_nn_cudnn engram_tests_parallel \
  engram_tests_bench_cli
build_device_rc=$?
python3 "$root/scripts/source-mtimes.py" save "$root" "$bin/source-mtimes.json" >> "$log" 2>&1
# Each test stage's XML report, this run's only (a warm machine keeps the folder).
xml=$bin/check-xml
rm -rf "$xml" "$bin/device-tests.log" "$out/gpu_tests.json"
mkdir -p "$xml"
[ -x "$bin/tests/memory/engram_tests_memory_cuda" ] &&
  stage test-cuda 60 "$bin/tests/memory/engram_tests_memory_cuda" \
    --gtest_output="xml:$xml/cuda-test.xml"
[ -x "$bin/tests/nn/engram_tests_nn_cudnn" ] &&
  stage test-cudnn 120 "$bin/tests/nn/engram_tests_nn_cudnn" --gtest_output="xml:$xml/cudnn-test.xml"
device_ctest=(ctest --test-dir "$bin" -R "$device_tests" -E "$not_device_tests" -j 8
  --timeout 120 -V --output-junit "$xml/device-tests.xml" --test-output-size-passed 65536
  --test-output-size-failed 262144)
# ctest writes its report only when it ends: stopped at the stage's limit it would leave none.
# Its own stop time, 15 s inside the stage's budget, cuts the tests short (their timeouts shrink
# to it) and still writes the report.
device_budget=$(budget_for 180)
[ "$device_budget" -gt 20 ] &&
  device_ctest+=(--stop-time "$(date -d "+$(( device_budget - 15 )) seconds" +%H:%M:%S)")
STAGE_LOG=$bin/device-tests.log stage test-device 180 "${device_ctest[@]}"
# The three reports as one results file (each test's status and what it printed: its largest
# differences), with the build's exit status (not 0: some executables may be missing, or an
# earlier build's). Where no report could be read, the device tests' verbose log comes back
# instead; where only theirs is missing (ctest writes it at its end: cut short, or crashed), the
# log's end goes into gpu-check.log, so that the files coming back stay eight.
if compgen -G "$xml/*.xml" > /dev/null; then
  python3 "$root/scripts/reproduce/gpu_tests.py" --out "$out/gpu_tests.json" \
    --commit "$ENGRAM_REPRO_COMMIT" --build-exit "$build_device_rc" \
    --command "engram_tests_memory_cuda --gtest_output=xml:$xml/cuda-test.xml" \
    --command "engram_tests_nn_cudnn --gtest_output=xml:$xml/cudnn-test.xml" \
    --command "${device_ctest[*]}" \
    test-cuda="$xml/cuda-test.xml" test-cudnn="$xml/cudnn-test.xml" \
    test-device="$xml/device-tests.xml" >> "$log" 2>&1
fi
if [ ! -e "$out/gpu_tests.json" ] && [ -e "$bin/device-tests.log" ]; then
  cp "$bin/device-tests.log" "$out/"
elif [ ! -e "$xml/device-tests.xml" ] && [ -e "$bin/device-tests.log" ]; then
  { echo "== the end of device-tests.log (ctest wrote no report)"
    tail -n 400 "$bin/device-tests.log"; } >> "$log"
fi
export ENGRAM_BIN=$bin/cli/engram ENGRAM_REPRO_ANY_BINARY=1
if [ -x "$ENGRAM_BIN" ]; then
  # What no GPU has measured yet first: the stages of a fixed length (the second stream and its
  # scaling, ResNet-50, the data-parallel bench on the device), then the largest batch under a
  # memory cap in what they leave; then what has results committed from an earlier run.
  # Two runs, collected after both: with less than 90 s the second would not end.
  STAGE_MIN=90 stage ooo-streams 120 bash "$root/scripts/reproduce/gpu_ooo_streams.sh" \
    --out "$out/gpu_ooo_streams.json" &&
    cp "$out/gpu_ooo_streams.json" "$bin/gpu_ooo_streams.json"
  # From this run's streams, or from an earlier run's on this machine: the device tool empties
  # $OUT before each command, and the build folder stays (--stages scale on a warm machine).
  streams=$out/gpu_ooo_streams.json
  [ -s "$streams" ] || streams=$bin/gpu_ooo_streams.json
  if [ -s "$streams" ]; then
    stage scale 30 "$ENGRAM_BIN" bench scale --from "$streams" --json "$bin/gpu_scaling.json"
  elif [ -z "$only" ] || [[ "$only" == *",scale,"* ]]; then
    say "scale: not run, no streams JSON (ooo-streams wrote none on this machine)"
  fi
  # Its first batch's seven rows take a minute or more: with less it would write nothing.
  STAGE_MIN=120 stage memory-resnet50 150 bash "$root/scripts/reproduce/gpu_memory_resnet50.sh" \
    --out "$out/gpu_memory_resnet50.json"
  # Two ranks sharing the GPU over Gloo, Engram's schedules and DDP, the link emulated as on
  # the CPU (the table into the log; its JSON stays on the machine).
  stage dp-device 90 "$ENGRAM_BIN" bench dp --device cuda:0 --dist-backend gloo --ranks 2 \
    --models resnet,npi --schedules none,after,overlap,ooo --links 0,1250000000 --steps 3 \
    --warmup 2 --json "$bin/gpu_dp.json"
  # After the stages of a fixed length: it takes what they leave, up to 300 s, and stops its own
  # search in time (--time-limit from STAGE_SECONDS), saying what it cut; started with less than
  # 150 s, too little of it would run.
  STAGE_MIN=150 stage memory-cap 300 bash "$root/scripts/reproduce/gpu_memory_cap.sh" \
    --out "$out/gpu_memory_cap.json"
  # NCCL on every GPU, one rank each, beside DDP: only a machine with two GPUs or more.
  if [ "$gpus" -ge 2 ]; then
    stage dp-nccl 240 bash "$root/scripts/reproduce/gpu_dp_nccl.sh" --out "$out/gpu_dp_nccl.json"
  else
    say "dp-nccl: not run, this machine has $gpus GPU (NCCL across GPUs needs two)"
  fi
  stage memory-resnet 150 bash "$root/scripts/reproduce/gpu_memory_resnet.sh" \
    --out "$out/gpu_memory_resnet.json"
  stage npi-addition 240 bash "$root/scripts/reproduce/gpu_npi_addition.sh" \
    --out "$out/gpu_npi_addition.json"
else
  say "measurements: not run, no engram binary (build-device exit $build_device_rc)"
fi
stage build-all 300 ninja -C "$bin" -j "$jobs" -k 0
build_rc=$?
python3 "$root/scripts/source-mtimes.py" save "$root" "$bin/source-mtimes.json" >> "$log" 2>&1
if [ $build_rc -eq 0 ]; then
  # Without the notebooks' tests: the GPU machine's python3 has no matplotlib, and the notebooks
  # draw committed results on the CPU (CI runs them).
  # Not again what test-cuda, test-cudnn and test-device ran (their executables' tests and the
  # device pattern), but the tests that pattern catches without needing a GPU.
  stage ctest-unit 300 bash -c 'ctest --test-dir "$1" -L unit -j "$2" --timeout 120 \
    --output-on-failure -E "^notebooks_|$3|^ReluCompressionCuda[.]|^CudnnConv(Plan|Device)[.]" &&
    ctest --test-dir "$1" -L unit -R "$4" --timeout 120 --output-on-failure' ctest-unit \
    "$bin" "$jobs" "$device_tests" "$not_device_tests"
  stage ctest-integration 300 ctest --test-dir "$bin" -L integration \
    -E '^notebooks_' -j "$jobs" --timeout 300 --output-on-failure
fi
if [ -x "$bin/bench/engram_relu_cuda_bench" ]; then
  # Its JSON stays on the machine (eight files come back; this kernel's result is committed and
  # its code changes least): the table goes into the log.
  ENGRAM_RELU_CUDA_BENCH=$bin/bench/engram_relu_cuda_bench \
    stage bench-cuda 60 bash "$root/scripts/reproduce/relu_cuda.sh" --out "$bin/gpu_relu_cuda.json"
fi
if [ -x "$bin/bench/engram_cudnn_conv_bench" ]; then
  # Where gpu_dp_nccl.json came back in its place, its table into the log.
  cudnn_out=$out/gpu_cudnn_conv.json
  [ -e "$out/gpu_dp_nccl.json" ] && cudnn_out=$bin/gpu_cudnn_conv.json
  ENGRAM_CUDNN_CONV_BENCH=$bin/bench/engram_cudnn_conv_bench \
    stage bench-cudnn 120 bash "$root/scripts/reproduce/cudnn_conv.sh" --out "$cudnn_out"
fi
# Partial files of a stage cut short would take the place of a results file among the eight.
rm -f "$out"/*.partial "$out"/*.tmp
{
  echo "== build errors"
  grep -E -A6 "error:|FAILED:" "$log" | head -200
  echo "== the suite"
  grep -E "tests passed|Failed|\*\*\*|Not Run|ctest-" "$log" | tail -80
} > "$out/summary.txt"
cat "$out/summary.txt" >> "$log"
rm "$out/summary.txt"
say "done"
