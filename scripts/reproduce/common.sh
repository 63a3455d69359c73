# Shared by the reproduce scripts: argument parsing and a timed, logged command runner.
# Sourced, not run. Sets: root, engram, torchrun, quick (0/1), out, work, jobs, keep_work (0/1).
# Options every script takes: --quick, --out FILE.json; --jobs N (runs at a time, for the scripts
# that run several: each on one thread) and --work DIR (keep the runs' files in DIR, not a
# temporary folder, so that a stopped run started again with the same DIR skips what is done, for
# the scripts that say they resume).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
engram=${ENGRAM_BIN:-$root/build/cli/engram}
# The pinned Python environment (scripts/python/env.sh): its torchrun starts data-parallel jobs.
source "$root/scripts/python/env.sh"
torchrun=${ENGRAM_TORCHRUN:-$ENGRAM_VENV/bin/torchrun}
quick=0
out=""
jobs=1
keep_work=0
work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --work) work=$2; keep_work=1; shift ;;
    *) echo "usage: $0 [--quick] [--out FILE.json] [--jobs N] [--work DIR]" >&2; exit 2 ;;
  esac
  shift
done
case "$jobs" in
  '' | *[!0-9]* | 0) echo "$0: --jobs takes a positive number, not '$jobs'" >&2; exit 2 ;;
esac
if [ ! -x "$engram" ]; then
  echo "$0: $engram not built; run scripts/build.sh first" >&2
  exit 1
fi
# The commit the binary was built from, which the results record (collect.py): `engram --version`
# names it. A binary built from uncommitted code, or from another commit than the checkout's
# scripts, would give results no commit describes, so the run is refused
# (ENGRAM_REPRO_ANY_BINARY=1 allows it: the tests' quick runs, which write into the build folder).
binary_commit=$("$engram" --version | sed -n 's/^engram //p')
head_commit=$(git -C "$root" rev-parse --short=12 HEAD 2> /dev/null || echo unknown)
if [ "${ENGRAM_REPRO_ANY_BINARY:-0}" != 1 ] && [ "$binary_commit" != "$head_commit" ]; then
  echo "$0: $engram was built from $binary_commit, the checkout is $head_commit: rebuild" \
    "(scripts/build.sh) so that the results name the code that made them" >&2
  exit 1
fi
ENGRAM_REPRO_COMMIT=${ENGRAM_REPRO_COMMIT:-${binary_commit%-dirty}}
export ENGRAM_REPRO_COMMIT
if [ "$keep_work" = 1 ]; then
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

# run_logged NAME CMD...: runs an engram command, appends it to NAME.cmd, echoes it.
run_logged() {
  local name=$1
  shift
  echo "+ engram $*" | tee -a "$work/$name.cmd" >&2
  "$engram" "$@"
}

# train_timed_as MODEL NAME ARGS...: engram train MODEL ARGS (metrics to NAME.metrics.jsonl,
# output to NAME.train.txt), prints elapsed seconds.
train_timed_as() {
  local model=$1 name=$2
  shift 2
  local start end
  start=$(date +%s%N)
  run_logged "$name" train "$model" "$@" --metrics "$work/$name.metrics.jsonl" \
    > "$work/$name.train.txt"
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.1f", ns / 1e9 }'
}

# train_timed NAME ARGS...: engram train npi ARGS, prints elapsed seconds.
train_timed() { train_timed_as npi "$@"; }

# stdlib_corpus [ARGS...]: the standard-library functions (or with --modules, the modules) into
# $work/stdlib and their corpus into $work/stdlib.corpus (the tools' reports in
# $work/corpus.*.txt). ARGS after "--" go to data code.
stdlib_corpus() {
  local stdlib_args=() code_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do stdlib_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  code_args=("$@")
  run_logged corpus data stdlib --out "$work/stdlib" "${stdlib_args[@]}" \
    > "$work/corpus.stdlib.txt"
  run_logged corpus data code --lang python --src "$work/stdlib" --out "$work/stdlib.corpus" \
    "${code_args[@]}" > "$work/corpus.code.txt"
}

# primitive_args TASK LIBRARY: prints the eval/run flags that bind TASK's learned primitive from
# LIBRARY, one per line (addition-primitive: the full adder; map: the learned double).
primitive_args() {
  case "$1" in
    addition-primitive) printf '%s\n' --primitives "$2" ;;
    map) printf '%s\n' --primitives "$2" --primitive double ;;
  esac
}

# start_job FN NAME ARGS...: FN NAME ARGS in the background, at most $jobs at a time (the scripts
# that run several); a failed job is reported by NAME and stops new ones. finish_jobs waits for all
# and exits 1 if any failed.
jobs_failed=$work/failed
rm -f "$jobs_failed"
start_job() {
  local fn=$1 name=$2
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || touch "$jobs_failed"; done
  [ -e "$jobs_failed" ] && return 0
  ("$fn" "${@:2}" || { echo "$0: $name failed" >&2; touch "$jobs_failed"; exit 1; }) &
}
finish_jobs() {
  while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || touch "$jobs_failed"; done
  if [ -e "$jobs_failed" ]; then exit 1; fi
}

# collect_curves CLAIM NAME...: writes $out from the runs NAME (collect.py --curves: each run's
# files in $work, its training seconds in $work/NAME.secs, written once its training finished; a
# run without them failed, and nothing is written).
collect_curves() {
  local claim=$1 name runs=()
  shift
  for name in "$@"; do
    [ -s "$work/$name.secs" ] || { echo "$0: run $name failed" >&2; exit 1; }
    runs+=("$name=$(cat "$work/$name.secs")")
  done
  /usr/bin/python3 "$root/scripts/reproduce/collect.py" --curves "$out" "$claim" "$work" \
    "${runs[@]}"
}

# collect_bench_runs CLAIM NAME...: writes $out from the `engram bench` reports $work/NAME.json
# run under run_logged's name `bench` (collect.py --bench-runs). The python3 on the PATH: collect.py
# needs only the standard library, and the GPU machine's python3 is its own environment's.
collect_bench_runs() {
  python3 "$root/scripts/reproduce/collect.py" --bench-runs "$out" "$1" "$work" "${@:2}"
}
