#!/usr/bin/env bash
# engram synth --recognizer tbcnn end to end: a small loop-task TBCNN (localized, trained on the
# generated loop corpus) reads the loop of a function that is not the file's last; `classify
# --function` gives the same reading as the function alone in a file. synth then goes on when
# the TBCNN's class is the traced program's outermost stage (its JSON says so) and stops with
# exit 1 naming both when it is not; which of the two happens depends on the small model, and
# the test checks the one the classifier's answer calls for. Usage errors exit 2.
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
    s = 0
    for x in xs:
        s = s + x
    return s % 10


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

for fn in evens total; do
  cls=$("$engram" classify --model loop.pt --file f.py --function "$fn" | head -n 1 | awk '{print $1}')
  want=$( [ "$fn" = evens ] && echo filter || echo fold )
  out=$("$engram" synth --source f.py --function "$fn" --recognizer tbcnn --tbcnn-model loop.pt \
    --checks 20 --check-length 12 --json 2> err.txt)
  code=$?
  if [ "$cls" = "$want" ]; then
    [ $code -eq 0 ] || fail "$fn: the TBCNN reads $cls as the trace does, yet exit $code: $(cat err.txt)"
    /usr/bin/python3 - "$out" "$cls" <<'PY' || fail "$fn: JSON"
import json, sys
r, cls = json.loads(sys.argv[1]), sys.argv[2]
assert r["recognizer"]["name"] == "tbcnn" and r["recognizer"]["stage"] == cls, r["recognizer"]
assert r["shape"].split("(")[0] == cls, r["shape"]
assert 0 < r["recognizer"]["probability"] <= 1, r["recognizer"]
assert r["check"]["agreed"] == 20, r["check"]
PY
    echo "$fn: tbcnn reads $cls, as the trace: synthesized"
  else
    [ $code -eq 1 ] || fail "$fn: the TBCNN reads $cls, the trace $want, yet exit $code"
    grep -q "the tbcnn recogniser reads the loop of $fn as $cls" err.txt ||
      fail "$fn: the message does not name the TBCNN's class: $(cat err.txt)"
    grep -q "computes $want(" err.txt || fail "$fn: the message does not name the trace's program"
    [ -z "$out" ] || fail "$fn: output on a failure: $out"
    echo "$fn: tbcnn reads $cls, the trace $want: refused, naming both"
  fi
done
# The trace recogniser (the default) says so in its JSON.
"$engram" synth --source f.py --function evens --checks 5 --json |
  /usr/bin/python3 -c "import json,sys; assert json.load(sys.stdin)['recognizer'] == {'name': 'trace'}" ||
  fail "the default recognizer in the JSON"
echo "recognizer: usage errors, classify --function, and the tbcnn route checked"
