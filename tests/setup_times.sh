#!/usr/bin/env bash
# scripts/reproduce/setup_times.sh's plumbing, in a scratch repository whose demo.sh and test.sh
# are stand-ins: each command runs in a fresh clone of HEAD of its own (a file left in the
# checkout is not there), its seconds and what it found are recorded, and a command that fails
# ends the script with exit 1, the results file left as it was.
# Usage: setup_times.sh SCRATCH_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$1/setup_times
rm -rf "$scratch"
mkdir -p "$scratch/repo/scripts/reproduce" "$scratch/repo/scripts/python"
repo=$scratch/repo
cp "$root/scripts/reproduce/setup_times.sh" "$root/scripts/reproduce/collect.py" \
  "$repo/scripts/reproduce/"
echo "ENGRAM_VENV=$scratch/venv; export ENGRAM_VENV" > "$repo/scripts/python/env.sh"
cat > "$repo/scripts/demo.sh" << 'DEMO'
[ -e untracked.txt ] && { echo "not a fresh clone"; exit 4; }
[ -n "${ENGRAM_PREFIX:-}" ] || { echo "no ENGRAM_PREFIX"; exit 5; }
echo "demo $ENGRAM_VENV" >> "$SETUP_TEST_SEEN"
sleep 0.2
DEMO
printf 'echo "test $ENGRAM_VENV" >> "$SETUP_TEST_SEEN"\nexit "${SETUP_TEST_EXIT:-0}"\n' \
  > "$repo/scripts/test.sh"
git -C "$repo" init --quiet && git -C "$repo" add -A &&
  git -C "$repo" -c user.name=t -c user.email=t@t commit --quiet -m stand-ins || exit 1
touch "$repo/untracked.txt"
status=0
out=$scratch/times.json
export SETUP_TEST_SEEN=$scratch/seen.txt
if ! env -u PIP_NO_CACHE_DIR bash "$repo/scripts/reproduce/setup_times.sh" --out "$out" \
     --new-python-env \
     > "$scratch/log" 2>&1 ||
   ! python3 - "$out" "$(git -C "$repo" rev-parse --short=12 HEAD)" << 'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["commit"] == sys.argv[2], d["commit"]
assert [r["command"] for r in d["runs"]] == ["bash scripts/demo.sh", "bash scripts/test.sh"], d
assert d["runs"][0]["seconds"] >= 0.2, d["runs"][0]
assert d["runs"][0]["python_environment_present"] is False, d["runs"][0]
assert d["runs"][0]["ccache"] is None or set(d["runs"][0]["ccache"]) == {"hits", "misses"}
assert [r["pip_cache"] for r in d["runs"]] == [False, True], d["runs"]
assert d["reproduce"]["commands"][0].endswith("--commands demo,test --new-python-env"), d
PY
then
  echo "setup_times.sh did not time both stand-ins into $out:"; cat "$scratch/log"
  status=1
fi
# With --new-python-env the demo gets an environment of its own, the tests the machine's.
seen_demo=$(sed -n 's/^demo //p' "$SETUP_TEST_SEEN")
seen_test=$(sed -n 's/^test //p' "$SETUP_TEST_SEEN")
if [ -z "$seen_demo" ] || [ "$seen_demo" = "$scratch/venv" ] || [ "$seen_test" != "$scratch/venv" ]
then
  echo "--new-python-env: the environments the commands saw:"; cat "$SETUP_TEST_SEEN"
  status=1
fi
echo previous > "$out"
SETUP_TEST_EXIT=3 bash "$repo/scripts/reproduce/setup_times.sh" --out "$out" \
  > "$scratch/log" 2>&1
rc=$?
if [ $rc -ne 1 ] || [ "$(cat "$out")" != previous ] || ! grep -q "test.sh failed" "$scratch/log"
then
  echo "a failing test.sh: exit $rc (expected 1, the results file left as it was):"
  cat "$scratch/log"
  status=1
fi
exit $status
