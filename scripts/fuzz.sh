#!/usr/bin/env bash
# Fuzzes one parser of untrusted bytes (fuzz/fuzz_TARGET.cpp) with libFuzzer for SECONDS, or every
# target in turn (TARGET "all", SECONDS each), and records the run in results/fuzz.json (total
# seconds and executions per target, coverage, the corpus's size; commit and machine inside).
#   bash scripts/fuzz.sh TARGET|all SECONDS [--no-record] [--jobs N]
# Targets: trace_file corpus program_expression task_input source checkpoint. --jobs N fuzzes N
# targets at a time (one core each; "all" in SECONDS * 6 / N of wall time).
# Builds build-fuzz/ with clang, libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer
# (-DENGRAM_FUZZ=ON) the first time. The corpus grows in build-fuzz/corpus/TARGET/ (not
# committed), seeded from fuzz/corpus/TARGET/. A crash is written to fuzz/crashes/ and fails the
# run (exit 1): add it to fuzz/corpus/TARGET/ as a regression once it is fixed (the replay test
# then runs it on every build). --no-record: CI's short runs, which leave results/ alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
targets_all=(trace_file corpus program_expression task_input source checkpoint)
usage() {
  echo "usage: $0 TARGET|all SECONDS [--no-record] [--jobs N]  (targets: ${targets_all[*]})" >&2
  exit 2
}
[ $# -ge 2 ] || usage
target=$1
seconds=$2
shift 2
record=1
jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-record) record=0 ;;
    --jobs)
      [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage
      jobs=$2
      shift
      ;;
    *) usage ;;
  esac
  shift
done
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -ge 1 ] || usage
if [ "$target" = all ]; then
  targets=("${targets_all[@]}")
else
  [[ " ${targets_all[*]} " == *" $target "* ]] || usage
  targets=("$target")
fi
build=${ENGRAM_FUZZ_BUILD_DIR:-$root/build-fuzz}
# The commit the binaries are built from (HEAD may move while a long run goes on).
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
export ENGRAM_REPRO_COMMIT=$commit
if [ ! -f "$build/build.ninja" ]; then
  [ "${ENGRAM_SKIP_INSTALL:-0}" = 1 ] || bash "$root/scripts/install-deps.sh" >&2
  bash "$root/scripts/fetch-grammars.sh" >&2
  source "$root/scripts/python/env.sh"  # ENGRAM_PY, and nvcc on PATH (torch's CMake files find CUDA)
  launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DENGRAM_FUZZ=ON -DENGRAM_CUDA=OFF \
    -DENGRAM_BUILD_TESTS=OFF -DENGRAM_PYTHON="$ENGRAM_PY" "${launcher[@]}" >&2
fi
cmake --build "$build" --parallel "$(nproc)" $(printf -- "--target fuzz_%s " "${targets[@]}") >&2
mkdir -p "$root/fuzz/crashes"
# fuzz_one TARGET: one libFuzzer run, recorded; returns 1 when it found a failure.
fuzz_one() {
  local t=$1 status=0
  local corpus=$build/corpus/$t log=$build/fuzz_$t.log before after code
  mkdir -p "$corpus"
  before=$(ls "$root/fuzz/crashes" | grep -c "^$t-" || true)
  echo "fuzz: $t for $seconds s" >&2
  set +e
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that takes 4 GB a leak.
  "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$root/fuzz/crashes/$t-" \
    "$corpus" "$root/fuzz/corpus/$t" > "$log" 2>&1
  code=$?
  set -e
  after=$(ls "$root/fuzz/crashes" | grep -c "^$t-" || true)
  tail -n 12 "$log" | grep -E "DONE|stat::number_of_executed_units|cov:" | tail -n 3 |
    sed "s/^/fuzz: $t: /" >&2 || true
  if [ "$code" != 0 ] || [ "$after" != "$before" ]; then
    echo "fuzz: $t found a failure (exit $code): see $log and fuzz/crashes/" >&2
    grep -E "ERROR|SUMMARY|==[0-9]+==" "$log" | head -n 5 >&2 || true
    status=1
  fi
  if [ "$record" = 1 ]; then
    # The lanes take turns (flock) to add their run to results/fuzz.json.
    /usr/bin/python3 - "$root" "$t" "$seconds" "$log" "$corpus" "$code" "$commit" "$build" "$jobs" \
      <<'PY' || { echo "fuzz: $t: the run could not be recorded" >&2; status=1; }
import fcntl, json, os, re, sys
root, target, seconds, log, corpus, code, commit, build, jobs = sys.argv[1:10]
lock = open(os.path.join(build, "fuzz.lock"), "w")
fcntl.flock(lock, fcntl.LOCK_EX)
sys.path.insert(0, os.path.join(root, "scripts", "reproduce"))
from collect import write_result
text = open(log, errors="replace").read()
def last(pattern, cast=int):
    found = re.findall(pattern, text)
    return cast(found[-1]) if found else None
run = {"seconds": int(seconds), "exit": int(code),
       "executions": last(r"stat::number_of_executed_units:\s*(\d+)"),
       "coverage": last(r"\bcov: (\d+)"), "features": last(r"\bft: (\d+)"),
       "corpus_files": len(os.listdir(corpus)),
       "peak_rss_mb": last(r"stat::peak_rss_mb:\s*(\d+)"), "commit": commit,
       "targets_at_a_time": int(jobs)}
path = os.path.join(root, "results", "fuzz.json")
report = json.load(open(path)) if os.path.exists(path) else {}
targets = report.get("targets", {})
entry = targets.setdefault(target, {"seconds": 0, "executions": 0, "runs": []})
entry["runs"].append(run)
entry["seconds"] = sum(r["seconds"] for r in entry["runs"])
entry["executions"] = sum(r["executions"] or 0 for r in entry["runs"])
entry["coverage"] = max((r["coverage"] or 0) for r in entry["runs"])
write_result(path, "libFuzzer runs of each parser of untrusted bytes (clang 14, ASan + UBSan)",
             {"targets": dict(sorted(targets.items())),
              "reproduce": {"script": "scripts/fuzz.sh", "commands": ["bash scripts/fuzz.sh TARGET SECONDS"]}})
PY
  fi
  return $status
}

# Lane i fuzzes targets i, i+jobs, ... in turn; the lanes run side by side.
lanes=()
for ((lane = 0; lane < jobs && lane < ${#targets[@]}; ++lane)); do
  (
    lane_status=0
    for ((i = lane; i < ${#targets[@]}; i += jobs)); do
      fuzz_one "${targets[$i]}" || lane_status=1
    done
    exit $lane_status
  ) &
  lanes+=($!)
done
status=0
for pid in "${lanes[@]}"; do wait "$pid" || status=1; done
exit $status
