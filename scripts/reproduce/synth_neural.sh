#!/usr/bin/env bash
# Claim (issue 21): every function of tests/synth/functions.py is recovered as the program its
# "# expect:" line names, and the neural program (map, filter, fold, scan and zipwith trained
# with default options on lists of length at most 10, seed 1; the primitive library's networks,
# K = 10, each new primitive trained by synth as --add does, into the function's own copy of the
# library) equals the Python function on 1000 random lists of length 100. Writes
# results/synth.json; --quick runs a tiny version (two functions, small programs, 20 lists of
# length 30). --jobs N runs N trainings or functions at a time, each on one thread; --work DIR
# keeps the runs in DIR, and a run started again with the same DIR skips what is done.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/synth.json}
source_file=$root/tests/synth/functions.py
train_opts=()
gen_extra=()
checks=1000
length=100
functions=$(grep -A1 "^# expect:" "$source_file" | sed -n 's/^def \([a-z_0-9]*\)(.*/\1/p')
lib_extra=()
if [ "$quick" = 1 ]; then
  train_opts=(--steps 400 --hidden 64)
  gen_extra=(--max-len 6 --per-length 8)
  checks=20
  length=30
  functions="squares_loop affine"
  lib_extra=(--primitive square)
fi
threads=0
[ "$jobs" -gt 1 ] && threads=1
models=$work/models
mkdir -p "$models"
lib=$work/primitives.pt
if [ ! -s "$lib" ]; then
  rm -f "$work/library.cmd"
  run_logged library train primitives --out "$lib" --k 10 --threads "$threads" \
    "${lib_extra[@]}" > /dev/null
fi

# one_model TASK: its traces and its program; TASK.model.json marks it done.
one_model() {
  local task=$1
  [ -s "$work/$task.model.json" ] && return 0
  rm -f "$work/$task.cmd"
  run_logged "$task" data gen --task "$task" --seed 1 --out "$work/$task.jsonl" \
    "${gen_extra[@]}" > /dev/null || return 1
  local secs
  secs=$(train_timed "$task" --task "$task" --seed 1 --data "$work/$task.jsonl" \
    --out "$models/$task.pt" --threads "$threads" "${train_opts[@]}") || return 1
  [ -s "$models/$task.pt" ] || return 1
  echo "{\"task\": \"$task\", \"train_seconds\": $secs}" > "$work/$task.model.json.tmp"
  mv "$work/$task.model.json.tmp" "$work/$task.model.json"
}

# one_function NAME: synth on a fresh copy of the library (a new primitive is trained into the
# copy, so functions run side by side); NAME.seconds marks it done. A disagreement exits 1 and is
# recorded, not fatal; output that is not JSON fails the run.
one_function() {
  local f=$1
  [ -s "$work/$f.seconds" ] && return 0
  rm -f "$work/$f.cmd"
  cp "$lib" "$work/$f.primitives.pt"
  local start end status=0
  start=$(date +%s%N)
  run_logged "$f" synth --source "$source_file" --function "$f" --models "$models" \
    --primitives "$work/$f.primitives.pt" --checks "$checks" --check-length "$length" \
    --threads "$threads" --json > "$work/$f.synth.json" || status=$?
  end=$(date +%s%N)
  if [ "$status" -gt 1 ]; then return 1; fi
  if [ -s "$work/$f.synth.json" ]; then
    /usr/bin/python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$work/$f.synth.json" ||
      return 1
  fi
  awk -v ns=$((end - start)) 'BEGIN { printf "%.1f", ns / 1e9 }' > "$work/$f.seconds.tmp"
  mv "$work/$f.seconds.tmp" "$work/$f.seconds"
}

tasks="map filter fold scan zipwith"
[ "$quick" = 1 ] && tasks="map"
for task in $tasks; do start_job one_model "$task" "$task"; done
finish_jobs
for f in $functions; do start_job one_function "$f" "$f"; done
finish_jobs
/usr/bin/python3 - "$out" "$work" "$source_file" "$checks" "$length" $functions <<'PY'
import json, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(sys.argv[3])), "..", "..",
                                "scripts", "reproduce"))
from collect import write_result
out, work, source, checks, length = sys.argv[1:6]
names = sys.argv[6:]
lines = open(source).read().splitlines()
expected = {}
for i, line in enumerate(lines):
    m = re.match(r"# expect: (.+)$", line)
    if m:
        expected[re.match(r"def (\w+)\(", lines[i + 1]).group(1)] = m.group(1).strip()
def cmds(name):
    with open(os.path.join(work, name + ".cmd")) as f:
        return [l.rstrip("\n") for l in f if l.strip()]
functions = []
for name in names:
    path = os.path.join(work, name + ".synth.json")
    text = open(path).read().strip()
    entry = {"function": name, "expected": expected[name], "commands": cmds(name),
             "seconds": float(open(os.path.join(work, name + ".seconds")).read())}
    if not text:
        entry["error"] = True
    else:
        r = json.loads(text)
        pattern = re.escape(expected[name]).replace(
            "NEW", rf"{name}_(map|filter|fold|scan|zipwith)_\d+(_\d+)?")
        entry.update({"expression": r["expression"],
                      "as_expected": re.fullmatch(pattern, r["expression"]) is not None,
                      "primitives": [{"primitive": p["primitive"], "known": p["known"],
                                      "stage": p["stage"]} for p in r["primitives"]],
                      "exact": r["check"], "neural": r["neural"]})
    functions.append(entry)
models = []
for task in ["map", "filter", "fold", "scan", "zipwith"]:
    p = os.path.join(work, task + ".model.json")
    if os.path.exists(p):
        m = json.load(open(p))
        m["commands"] = cmds(task)
        models.append(m)
write_result(out, "every function of tests/synth/functions.py recovered as expected; its neural "
             "program (programs trained on lists of length <= 10, primitive networks, new "
             f"primitives added by synth) equals the function on {checks} random lists of "
             f"length {length}, K = 10",
             {"checks": int(checks), "length": int(length), "models": models,
              "library_commands": cmds("library"), "functions": functions,
              "reproduce": {"script": "scripts/reproduce/synth_neural.sh"}})
PY
echo "wrote $out"
