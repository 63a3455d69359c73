#!/usr/bin/env bash
# How long the README's two commands take on this machine: each in a fresh clone of HEAD of its
# own (`git clone` of this checkout), `bash scripts/demo.sh` (installs, builds engram, runs the
# demo; engram installed into the clone, not ~/.local) and `bash scripts/test.sh` (installs,
# builds everything, runs the unit, integration and claims tests), timed one after the other.
# Each run records what it found already there, which decides most of its time: the pinned
# Python environment (present, or created from PyPI by the run), and ccache's hits and misses
# during the run (a cache holding an earlier clone's objects compiles little). A command that
# fails ends the script (exit 1, its log's end printed) and no results file is written.
# --new-python-env gives the demo a new Python environment of its own (ENGRAM_VENV in the
# scratch folder: created from PyPI, as on a new machine, and removed after); the test command
# then uses the machine's. Writes results/setup_times.json (--out FILE: there); --commands
# demo|test|demo,test picks the commands.
#   bash scripts/reproduce/setup_times.sh [--out FILE.json] [--commands demo,test]
#                                         [--new-python-env]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/results/setup_times.json
commands=demo,test
new_env=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --commands) commands=$2; shift ;;
    --new-python-env) new_env=1 ;;
    *) echo "usage: $0 [--out FILE.json] [--commands demo,test] [--new-python-env]" >&2; exit 2 ;;
  esac
  shift
done
for name in ${commands//,/ }; do
  case "$name" in demo | test) ;; *)
    echo "$0: --commands takes demo and test, not '$name'" >&2; exit 2 ;;
  esac
done
commit=$(git -C "$root" rev-parse --short=12 HEAD)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The pinned Python environment scripts/python/env.sh would use (its folder, without creating it).
python_env=$(bash -c 'source "$1/scripts/python/env.sh" && echo "$ENGRAM_VENV"' - "$root")

have_ccache=false
ccache --print-stats > /dev/null 2>&1 && have_ccache=true
ccache_count() {  # the sum of the named counters of ccache --print-stats (0 without ccache)
  "$have_ccache" || { echo 0; return; }
  { ccache --print-stats 2> /dev/null || true; } |
    awk -v names="$*" 'BEGIN { split(names, n, " "); for (i in n) want[n[i]] = 1 }
      ($1 in want) { sum += $2 } END { print sum + 0 }'
}

runs=$work/runs.jsonl
: > "$runs"
for name in ${commands//,/ }; do
  clone=$work/$name
  git clone --quiet "$root" "$clone"
  # A new environment (--new-python-env) is made from PyPI without pip's cache, as on a new
  # machine. One counts as present as install-deps.sh counts it: made from this lock file.
  env_present=false
  venv=$python_env
  no_pip_cache=${PIP_NO_CACHE_DIR:-}
  if [ "$name" = demo ] && [ "$new_env" = 1 ]; then
    venv=$work/venv
    no_pip_cache=1
  fi
  cmp -s "$venv/.engram-lock" "$clone/scripts/python/requirements.lock" && env_present=true
  hits=$(ccache_count direct_cache_hit preprocessed_cache_hit)
  misses=$(ccache_count cache_miss)
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "setup_times: bash scripts/$name.sh in a fresh clone ($clone)" >&2
  start=$(date +%s%N)
  # The clone's own build folder and targets, whatever the caller's environment says.
  if ! (cd "$clone" && env -u ENGRAM_BUILD_DIR -u ENGRAM_TARGETS ENGRAM_VENV="$venv" \
        ENGRAM_PREFIX="$clone/prefix" PIP_NO_CACHE_DIR="$no_pip_cache" bash "scripts/$name.sh") \
      > "$work/$name.log" 2>&1; then
    tail -40 "$work/$name.log" >&2
    echo "setup_times: bash scripts/$name.sh failed; $out left as it was" >&2
    exit 1
  fi
  end=$(date +%s%N)
  python3 -c 'import json, sys
name, seconds, env, no_cache, ccache, hits, misses, load = sys.argv[1:]
print(json.dumps({"command": f"bash scripts/{name}.sh", "seconds": round(float(seconds), 1),
                  "python_environment_present": env == "true",
                  "pip_cache": not no_cache,
                  "ccache": {"hits": int(hits), "misses": int(misses)} if ccache == "true"
                  else None,
                  "load_average_at_start": float(load)}))' \
    "$name" "$(awk -v ns=$((end - start)) 'BEGIN { print ns / 1e9 }')" "$env_present" \
    "$no_pip_cache" "$have_ccache" \
    "$(( $(ccache_count direct_cache_hit preprocessed_cache_hit) - hits ))" \
    "$(( $(ccache_count cache_miss) - misses ))" "$load" >> "$runs"
done
options="--commands $commands"
[ "$new_env" = 1 ] && [[ ",$commands," == *,demo,* ]] && options+=" --new-python-env"
python3 - "$root/scripts/reproduce" "$out" "$commit" "$runs" "$options" << 'EOF'
import datetime, json, os, sys
sys.path.insert(0, sys.argv[1])
from collect import machine
out, commit, runs_path, options = sys.argv[2:]
with open(runs_path) as f:
    runs = [json.loads(line) for line in f if line.strip()]
result = {
    "claim": "the README's two commands, each from a fresh clone: seconds, and what was already "
             "there (the pinned Python environment, ccache's hits and misses during the run)",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "commit": commit,
    "machine": machine(),
    "runs": runs,
    "reproduce": {"script": "scripts/reproduce/setup_times.sh",
                  "commands": [f"bash scripts/reproduce/setup_times.sh {options}"]},
}
with open(out + ".tmp", "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
os.replace(out + ".tmp", out)
print(f"wrote {out}")
EOF
