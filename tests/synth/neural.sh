#!/usr/bin/env bash
# engram synth's neural route end to end: a MAP program trained on lists of length <= 6 and a
# primitive library without the function's element computation; synth trains the new primitive
# into the library (as `train primitives --add`, whose test shows the other networks stay byte
# for byte; the program file does here), and the neural program then agrees with the Python
# function on random lists of length 30. A second run trains nothing; `eval primitives` and
# `run --program` know the new primitive from the library file alone.
# Usage: neural.sh ENGRAM_BINARY WORK_DIR
set -uo pipefail
engram=$1
work=$2/synth_neural.$$
rm -rf "$work"
mkdir -p "$work/models"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > f.py <<'PY'
K = 10


def affine(xs):
    return [(3 * x + 1) % K for x in xs]


def squares(xs):
    return [x * x % K for x in xs]
PY
"$engram" data gen --task map --out map.jsonl --max-len 6 --per-length 8 > /dev/null || fail "data"
"$engram" train npi --task map --data map.jsonl --out models/map.pt --steps 400 --hidden 64 \
  --threads 1 > /dev/null || fail "train map"
"$engram" train primitives --out p.pt --primitive square --hidden 64 > /dev/null || fail "prims"
cp p.pt before.pt
cp models/map.pt map_before.pt
# A folder without the MAP program fails before anything is trained into the library (it
# trained the new primitive first and then failed, the library changed).
mkdir -p empty
"$engram" synth --source f.py --function affine --models empty --primitives p.pt --checks 5 \
  > /dev/null 2> empty.err && fail "synth with no MAP program succeeded"
grep -q "no model for map" empty.err || { cat empty.err; fail "synth: not the missing program"; }
cmp p.pt before.pt || fail "synth changed the library before finding the program missing"
synth() { "$engram" synth --source f.py --models models --primitives p.pt --checks 20 \
  --check-length 30 --json "$@"; }
out=$(synth --function affine) || fail "synth affine: $out"
/usr/bin/python3 - "$out" <<'PY' || exit 1
import json, sys
r = json.loads(sys.argv[1])
assert r["expression"] == "map(affine_map_5, xs)", r["expression"]
n = r["neural"]
assert [t["primitive"] for t in n["trained"]] == ["affine_map_5"], n
assert all(t["exact"] for t in n["trained"]), n
assert n["lists"] == 20 and n["agreed"] == 20, n
PY
cmp models/map.pt map_before.pt || fail "the program file changed"
out=$(synth --function affine) || fail "synth affine again: $out"
/usr/bin/python3 -c "import json,sys; n=json.loads(sys.argv[1])['neural']; assert n['trained']==[] and n['agreed']==20, n" "$out" ||
  fail "the second run trained again"
out=$(synth --function squares) || fail "synth squares: $out"
"$engram" eval primitives --model p.pt | grep -q "^affine_map_5 *unary *10 *10/10" ||
  fail "eval primitives does not list the new primitive"
[ "$("$engram" run --program "map(affine_map_5, xs)" --models models --primitives p.pt \
  --input 1,2,3 --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['output'])")" = "4,7,0" ] ||
  fail "run --program with the new primitive"
echo "neural: a new primitive trained by --add, the neural program agrees on 20 of 20 lists"
