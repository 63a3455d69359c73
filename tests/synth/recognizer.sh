#!/usr/bin/env bash
# engram synth --recognizer tbcnn end to end: a small loop-task TBCNN (localized, trained on the
# generated loop corpus) reads the loop of a function that is not the file's last; `classify
# --function` gives the same reading as the function alone in a file. The expectations are fixed
# by what each function computes (recognizer_check.py's labels: evens a filter, total a fold),
# not by the classifier's answer: the model trained on every class must read each function as its
# label and synth must go on (its JSON says so); a model trained on map and zipwith alone cannot,
# and synth must stop with exit 1 naming both its class and the trace's program. Usage errors
# exit 2. tests/claims_fail_on_spoiled.py shows recognizer_check.py failing with a label flipped.
# Usage: recognizer.sh ENGRAM_BINARY WORK_DIR
set -uo pipefail
engram=$1
work=$2/synth_recognizer.$$
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 "$here/../../synth/python/loop_corpus.py" --out src --per-class 30 --seed 1 ||
  fail "corpus"
"$engram" data code --lang python --src src --out loops.corpus > /dev/null || fail "data code"
"$engram" train tbcnn --corpus loops.corpus --out loop.pt --task loop --model localized \
  --steps 150 > /dev/null || fail "train tbcnn"
cat > f.py <<'PY'
def evens(xs):
    return [x for x in xs if x % 2 == 0]


def total(xs):
    return sum(x for x in xs) % 10


def helper(x):
    return x + 1
PY
sed -n '/^def evens/,/^$/p' f.py > evens_alone.py

# Usage errors: exit 2, one line, nothing run.
expect_usage() {
  local out
  out=$("$engram" synth --source f.py --function evens "$@" 2>&1 >/dev/null)
  [ $? -eq 2 ] || fail "synth $*: expected exit 2 ($out)"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "synth $*: not one line: $out"
}
expect_usage --recognizer tbcnn
expect_usage --tbcnn-model loop.pt
expect_usage --recognizer neural --tbcnn-model loop.pt
# A TBCNN of another task reads no loop: the model is named, not --function.
"$engram" train tbcnn --corpus loops.corpus --out files.pt --task classify --steps 5 > /dev/null ||
  fail "train a classify-task model"
out=$("$engram" synth --source f.py --function evens --recognizer tbcnn --tbcnn-model files.pt 2>&1)
[ $? -eq 2 ] || fail "a classify-task model: expected exit 2 ($out)"
[[ "$out" == *"--tbcnn-model 'files.pt' is not a loop-task model"* ]] || fail "message: $out"

# classify --function reads the named function's loop, wherever it is in the file.
a=$("$engram" classify --model loop.pt --file f.py --function evens) || fail "classify --function"
b=$("$engram" classify --model loop.pt --file evens_alone.py) || fail "classify alone"
[ "$a" = "$b" ] || fail "classify --function evens differs from evens alone: $a / $b"
"$engram" classify --model loop.pt --file f.py --function nothing > /dev/null 2>&1
[ $? -eq 1 ] || fail "classify --function of a missing function: expected exit 1"

# A model of two classes that are neither function's: it cannot read them right.
mkdir -p without
cp -r src/map src/zipwith without/
"$engram" data code --lang python --src without --out without.corpus > /dev/null ||
  fail "data code (map and zipwith)"
"$engram" train tbcnn --corpus without.corpus --out without.pt --task loop --model localized \
  --steps 20 > /dev/null || fail "train tbcnn (map and zipwith)"

# Each function with each model: what the TBCNN reads and what synth does, one JSON line each,
# checked against the functions' known labels by recognizer_check.py.
checks=20
: > observed.jsonl
for model in all without; do
  pt=loop.pt classes=map,filter,fold,scan,zipwith
  [ "$model" = without ] && pt=without.pt classes=map,zipwith
  for fn in evens total; do
    cls=$("$engram" classify --model "$pt" --file f.py --function "$fn" | head -n 1 |
      awk '{print $1}')
    out=$("$engram" synth --source f.py --function "$fn" --recognizer tbcnn --tbcnn-model "$pt" \
      --checks "$checks" --check-length 12 --json 2> err.txt)
    code=$?
    /usr/bin/python3 - "$model" "$classes" "$fn" "$cls" "$code" "$out" "$checks" >> observed.jsonl \
      <<'PY' || fail "recording $fn"
import json, sys
model, classes, fn, read, code, out, checks = sys.argv[1:8]
print(json.dumps({"model": model, "classes": classes.split(","), "function": fn, "read": read,
                  "exit": int(code), "stdout": out, "stderr": open("err.txt").read(),
                  "checks": int(checks)}))
PY
    echo "$fn, $model model: tbcnn reads $cls, synth exit $code"
  done
done
/usr/bin/python3 "$here/recognizer_check.py" observed.jsonl || {
  cat observed.jsonl >&2
  fail "the tbcnn route against the functions' labels"
}
# The trace recogniser (the default) says so in its JSON.
"$engram" synth --source f.py --function evens --checks 5 --json |
  /usr/bin/python3 -c "import json,sys; assert json.load(sys.stdin)['recognizer'] == {'name': 'trace'}" ||
  fail "the default recognizer in the JSON"
echo "recognizer: usage errors, classify --function, and the tbcnn route checked"
