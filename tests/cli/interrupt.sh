#!/usr/bin/env bash
# What a signal leaves on disk outside training, end to end:
#   1. SIGTERM and SIGINT while `engram data gen` writes its output: the temporary file is gone,
#      the earlier output is left as it was, one line on stderr says so, and the exit status is
#      the signal's (143, 130). (A shell's background job ignores SIGINT: a wrapper gives it back
#      its default action, as an interactive shell's foreground job has it.)
#   2. The same while `bench dp` runs its ranks: its private scratch folder under $TMPDIR is gone.
#   3. `engram demo` stopped while it trains names its state, and `engram demo --resume` continues
#      from it to the model of a demo never stopped; without a state, --resume is refused.
# Usage: interrupt.sh ENGRAM_BINARY WORK_DIR
set -uo pipefail
engram=$1
work=$2/interrupt.$$
rm -rf "$work"
mkdir -p "$work"
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
# with_default_sigint CMD...: CMD with SIGINT's default action (see 1.), in the place of the
# (background) shell that calls it, so that $! is the command's own process.
with_default_sigint() {
  exec /usr/bin/python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$@"
}
# until_written NAME SECONDS: until a file in this folder whose name matches NAME (a glob) holds
# more than a kilobyte (an output path's up-front check creates an empty one for an instant).
until_written() {
  for _ in $(seq 1 $(($2 * 50))); do
    [ -n "$(find . -maxdepth 1 -name "$1" -size +1k)" ] && return 0
    sleep 0.02
  done
  fail "no $1 was written within $2 s"
}

# 1. data gen, while it writes 20000 traces (about 75 MB).
echo '{"earlier": "output"}' > big.jsonl
for sig in TERM INT; do
  with_default_sigint "$engram" data gen --task addition --per-length 1000 --out big.jsonl \
    > /dev/null 2> gen.err &
  pid=$!
  until_written 'big.jsonl.tmp.*' 60
  kill -$sig $pid
  wait $pid
  code=$?
  expected=$([ $sig = INT ] && echo 130 || echo 143)
  [ "$code" = "$expected" ] || { cat gen.err; fail "data gen, SIG$sig: exit $code, not $expected"; }
  [ "$(cat gen.err)" = "engram: interrupted while writing 'big.jsonl': it is left as it was" ] ||
    { cat gen.err; fail "data gen, SIG$sig: not the one line naming the output"; }
  ! compgen -G 'big.jsonl.tmp.*' > /dev/null || fail "data gen, SIG$sig: a temporary file is left"
  [ "$(cat big.jsonl)" = '{"earlier": "output"}' ] || fail "data gen, SIG$sig: the output changed"
  echo "data gen, SIG$sig: exit $code, the temporary file removed, the earlier output kept"
done

# 2. bench dp: its scratch folder (the ranks' options and logs).
mkdir scratch
TMPDIR=$work/scratch with_default_sigint "$engram" bench dp --models npi --ranks 2 \
  --schedules none --steps 100000 --warmup 1 --hidden 16 --npi-batch 1 --no-peer \
  --json dp.json > /dev/null 2> dp.err &
pid=$!
for _ in $(seq 1 3000); do
  compgen -G 'scratch/engram-bench-dp-*/emulated-options.json' > /dev/null && break
  sleep 0.02
done
compgen -G 'scratch/engram-bench-dp-*/emulated-options.json' > /dev/null ||
  fail "bench dp: no scratch folder with its ranks' options within 60 s"
kill -INT $pid
wait $pid
code=$?
[ "$code" = 130 ] || { cat dp.err; fail "bench dp: exit $code, not 130"; }
[ -z "$(ls scratch)" ] || fail "bench dp: left $(ls scratch) in its TMPDIR"
[ ! -e dp.json ] || fail "bench dp: an interrupted run wrote its JSON"
echo "bench dp, SIGINT: exit 130, its scratch folder removed"

# 3. The demo, stopped while it trains, and resumed.
"$engram" demo --dir whole > /dev/null 2>&1 || fail "the demo never stopped"
"$engram" demo --dir part > /dev/null 2> demo.err &
pid=$!
for _ in $(seq 1 6000); do [ -s part/metrics.jsonl ] && break; sleep 0.01; done
[ -s part/metrics.jsonl ] || fail "the demo logged no step within 60 s"
kill -TERM $pid
wait $pid
code=$?
[ "$code" = 143 ] || { cat demo.err; fail "demo: exit $code, not 143"; }
grep -q "its state is in 'part/addition.pt.ckpt' (the same command with --resume continues)" \
  demo.err || { cat demo.err; fail "demo: the line does not say where the state is"; }
"$engram" demo --dir part --resume > demo.out 2> demo.err ||
  { cat demo.err; fail "demo --resume"; }
grep -q -- "--steps 1500 --resume" demo.out || fail "demo --resume: its header does not say so"
cmp whole/addition.pt part/addition.pt || fail "demo --resume: the model differs from the demo's"
mkdir fresh
"$engram" demo --dir fresh --resume > /dev/null 2> fresh.err
code=$?
[ "$code" = 1 ] || { cat fresh.err; fail "demo --resume without a state: exit $code, not 1"; }
echo "demo, SIGTERM while training: exit 143, and --resume ends with the demo's model bytes"
