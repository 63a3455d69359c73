#!/usr/bin/env bash
# Builds Engram with AddressSanitizer and UndefinedBehaviorSanitizer (gcc; -DENGRAM_ASAN=ON
# -DENGRAM_UBSAN=ON) into build-asan/ and runs tests under them, with the suppressions of
# tests/sanitizers/ (LibTorch's own reports only, each justified there). A sanitizer report fails
# the test it comes from.
#   bash scripts/sanitize.sh            every `unit` test (ctest -L unit)
#   bash scripts/sanitize.sh --subset   the unit tests of common/, memory/, nn/ and datasets/ and
#                                       the fuzz targets' corpus replays: what CI runs, the whole
#                                       set taking too long to build there
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ENGRAM_ASAN_BUILD_DIR:-$root/build-asan}
subset=0
case "${1:-}" in
  "") ;;
  --subset) subset=1 ;;
  *) echo "usage: $0 [--subset]" >&2; exit 2 ;;
esac
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
test_binaries=(common/engram_tests_common memory/engram_tests_memory nn/engram_tests_nn
               datasets/engram_tests_datasets)
fuzz_targets=(trace_file corpus program_expression task_input source checkpoint)
targets=()
if [ "$subset" = 1 ]; then
  for t in "${test_binaries[@]}"; do targets+=("${t#*/}"); done
  for t in "${fuzz_targets[@]}"; do targets+=("fuzz_$t"); done
fi
ENGRAM_BUILD_DIR=$build ENGRAM_TARGETS="${targets[*]}" bash "$root/scripts/build.sh" \
  -DENGRAM_ASAN=ON -DENGRAM_UBSAN=ON -DENGRAM_CUDA=OFF "${launcher[@]}"
supp=$root/tests/sanitizers
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
if [ "$subset" = 0 ]; then
  ctest --test-dir "$build" -L unit --output-on-failure --parallel "$(nproc)"
  exit
fi
status=0
for t in "${test_binaries[@]}"; do
  echo "sanitize: $t" >&2
  "$build/tests/$t" --gtest_brief=1 || status=1
done
for t in "${fuzz_targets[@]}"; do
  "$build/fuzz/fuzz_$t" "$root/fuzz/corpus/$t" || status=1
done
[ "$status" = 0 ] && echo "sanitize: no sanitizer report in the subset" >&2
exit $status
