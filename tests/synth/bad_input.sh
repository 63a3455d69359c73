#!/usr/bin/env bash
# engram synth on code outside what it supports: one line naming the construct and its line,
# exit 2; a function that raises, returns something outside the domain or never returns: exit 1;
# nothing left in the scratch folder.
# Usage: bad_input.sh ENGRAM_BINARY WORK_DIR
set -uo pipefail
engram=$1
work=$2/synth_bad.$$
rm -rf "$work"
mkdir -p "$work/tmp"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export TMPDIR=$work/tmp
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > bad.py <<'PY'
import math
CACHE = []
COUNT = 0


def uses_global(xs):
    global COUNT
    COUNT += 1
    return xs


def appends_global(xs):
    CACHE.append(1)
    return xs


def prints(xs):
    print(xs)
    return xs


def recursive(xs):
    if not xs:
        return []
    return [xs[0]] + recursive(xs[1:])


def raises(xs):
    return [10 // (x - 3) % 10 for x in xs]


def too_big(xs):
    return [x * x for x in xs]


def sorts(xs):
    return sorted(xs)


def reverses(xs):
    return xs[::-1]


def returns_text(xs):
    return "no"


def all_pairs(xs):
    return [(a + b) % 10 for a in xs for b in xs]


def forever(xs):
    while True:
        pass


def fine(xs):
    return [x for x in xs if x > 4]


def quits(xs):
    if len(xs) > 3:
        raise SystemExit(0)
    return xs


def wraps(xs):
    return [(x * 0xFFFFFFFFFFFFFFFF) % 10 for x in xs]


def big_local(xs):
    limit = 10**20
    out = []
    for x in xs:
        out.append((x + 1) % 10)
    return out
PY
printf 'raise SystemExit(3)\n\ndef f(xs):\n    return xs\n' > exits.py
printf 'def f(xs):\n    return [x for x in xs\n' > syntax.py
printf 'import os\n\ndef f(xs):\n    return xs\n' > imports.py
expect() {  # expect CODE PATTERN ARGS...
  local code=$1 pattern=$2
  shift 2
  timeout 120 "$engram" synth --checks 20 "$@" > out.txt 2> err.txt
  local got=$?
  [ "$got" = "$code" ] || { cat out.txt err.txt; fail "$*: exit $got, not $code"; }
  [ "$(wc -l < err.txt)" = 1 ] || { cat err.txt; fail "$*: not one line"; }
  grep -q -- "$pattern" err.txt || { cat err.txt; fail "$*: the error does not say '$pattern'"; }
}
expect 2 "line 7: 'global COUNT'" --source bad.py --function uses_global
expect 2 "line 13: 'CACHE.append()' changes the module-level 'CACHE'" --source bad.py --function appends_global
expect 2 "line 18: call of print()" --source bad.py --function prints
expect 2 "line 25: recursive call of recursive()" --source bad.py --function recursive
expect 2 "line 37: call of sorted()" --source bad.py --function sorts
expect 2 "a sort, a reversal" --source bad.py --function reverses
expect 2 "computed from 2 elements" --source bad.py --function all_pairs
expect 2 "line 1: import of 'os'" --source imports.py --function f
expect 2 "line 2: syntax error" --source syntax.py --function f
expect 2 "no function 'nothing' in the file" --source bad.py --function nothing
# Past 64-bit integers: wrapped to a negative constant, this was recovered as map(negate, xs).
expect 2 "line 68: the value 18446744073709551615 is outside 64-bit integers" --source bad.py \
  --function wraps
expect 1 "raised ZeroDivisionError at line 29" --source bad.py --function raises
expect 1 "returned 16 in its list, outside the domain 0..9" --source bad.py --function too_big
expect 1 "returned 'no': neither a list nor a number" --source bad.py --function returns_text
expect 1 "did not finish within 2 s" --source bad.py --function forever --timeout 2
# exit() ends the tracer too: reported as the function's (or the module's) failure, where it
# read as "the tracer's output is not JSON" or a bare "the tracer failed".
expect 1 "the function raised SystemExit at line 63" --source bad.py --function quits
expect 1 "loading exits.py raised SystemExit: 3" --source exits.py --function f
expect 1 "cannot read source file 'missing.py'" --source missing.py --function f
expect 2 "\-\-k must lie in 2..1000" --source bad.py --function fine --k 1
expect 2 "\-\-timeout must be positive" --source bad.py --function fine --timeout 0
# Counts far beyond any use are refused (--samples 100000000 aborted on std::bad_alloc).
expect 2 "\-\-samples must be between 0 and 100000" --source bad.py --function fine --samples 100000000
expect 2 "\-\-check-length must be between 1 and 100000" --source bad.py --function fine \
  --check-length 100000000
expect 2 "\-\-threads must be 0 (all cores) or between 1 and 1024" --source bad.py --function fine \
  --threads -2
# The other functions of a file do not matter: only what the function runs is checked.
timeout 120 "$engram" synth --source bad.py --function fine --checks 20 > out.txt 2> err.txt ||
  { cat err.txt; fail "a supported function beside unsupported ones"; }
grep -q "^filter(gt(4), xs)$" out.txt || { cat out.txt; fail "fine: the wrong program"; }
# A local too large for the trace that no computation uses does not matter either.
timeout 120 "$engram" synth --source bad.py --function big_local --checks 20 > out.txt 2> err.txt ||
  { cat err.txt; fail "an unused local past 64 bits"; }
grep -q "^map(succ, xs)$" out.txt || { cat out.txt; fail "big_local: the wrong program"; }
[ -z "$(ls -A "$TMPDIR")" ] || { ls -la "$TMPDIR"; fail "scratch files left behind"; }
echo "bad input: one-line errors, exit 2 for code outside the subset, 1 for failing functions"
