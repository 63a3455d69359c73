#!/usr/bin/env bash
# Resumable training, end to end (issue 20):
#   1. SIGINT and SIGTERM during `engram train npi` write the training state and exit 130 and 143
#      with one line; the same command with --resume ends with the model bytes (and metrics
#      lines, but for their clock) of a run never stopped.
#   2. kill -9 at random moments: the state file left behind is always a complete one, and
#      resuming from it gives the uninterrupted run's model again.
#   3. Bad requests: --resume without a state, a state of other options or of another world size,
#      --checkpoint-every for primitives, a negative --checkpoint-every.
#   4. Two ranks (torchrun's variables, loopback): SIGTERM to rank 1 alone stops both after the
#      same step, rank 0 writes the state, and two ranks resume to the model of an uninterrupted
#      two-rank run; one process cannot resume it. (`timeout` delivers the SIGTERM to rank 1
#      twice: to the process and to its group.)
#   5. A signal that comes twice: a second SIGTERM within a second of the first is the same
#      request (both ranks still stop after the same step with their state); one after that
#      stops the rank at once, and the other exits 1 naming it (not 141: SIGPIPE is ignored in
#      a job, so writing to the dead rank's socket is an error, not a kill). Rank 0 is held by SIGSTOP meanwhile, so that rank 1 is waiting in
#      an all-reduce with the first signal noted when the second comes.
#   6. A TBCNN run with --valid-every, which cannot be resumed: a signal writes no state.
# Usage: resume.sh ENGRAM_BINARY WORK_DIR
set -uo pipefail
engram=$1
work=$2/resume.$$
rm -rf "$work"
mkdir -p "$work"
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_for FILE SECONDS: until FILE exists.
wait_for() {
  for _ in $(seq 1 $(($2 * 20))); do [ -e "$1" ] && return 0; sleep 0.05; done
  fail "$1 did not appear within $2 s"
}
no_seconds() { sed 's/"seconds":[^,}]*,\{0,1\}//' "$1"; }

"$engram" data gen --task addition --out add.jsonl --max-len 4 --per-length 8 > /dev/null
train=(train npi --task addition --data add.jsonl --steps 2500 --hidden 32 --log-every 10)
"$engram" "${train[@]}" --out whole.pt --metrics whole.m > /dev/null || fail "the whole run"

# 1. Signals.
for sig in INT TERM; do
  rm -f part.pt part.pt.ckpt part.m
  "$engram" "${train[@]}" --out part.pt --metrics part.m --checkpoint-every 100 > /dev/null \
    2> part.err &
  pid=$!
  wait_for part.pt.ckpt 60
  sleep 0.3
  kill -$sig $pid
  wait $pid
  code=$?
  expected=$([ $sig = INT ] && echo 130 || echo 143)
  [ "$code" = "$expected" ] || { cat part.err; fail "SIG$sig: exit $code, not $expected"; }
  [ "$(wc -l < part.err)" = 1 ] || { cat part.err; fail "SIG$sig: not one line"; }
  grep -q "interrupted by SIG$sig after step [0-9]* of 2500; its state is in 'part.pt.ckpt'" \
    part.err || { cat part.err; fail "SIG$sig: the line does not say where the state is"; }
  [ -e part.pt ] && fail "SIG$sig: a model file was written for an unfinished run"
  "$engram" "${train[@]}" --out part.pt --metrics part.m --checkpoint-every 100 --resume \
    > /dev/null || fail "SIG$sig: resume"
  cmp whole.pt part.pt || fail "SIG$sig: the resumed model differs from the uninterrupted one"
  diff <(no_seconds whole.m) <(no_seconds part.m) > /dev/null ||
    fail "SIG$sig: the metrics lines differ"
  echo "SIG$sig: exit $code, $(cat part.err | sed 's/.*after step \([0-9]*\).*/stopped after step \1/'), resumed to the same bytes"
done

# 2. kill -9 at random moments, after the first state exists: the state file is whole.
for attempt in 1 2 3; do
  rm -f k.pt k.pt.ckpt
  "$engram" "${train[@]}" --out k.pt --checkpoint-every 7 > /dev/null 2>&1 &
  pid=$!
  wait_for k.pt.ckpt 60
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 $pid
  wait $pid 2> /dev/null
  "$engram" "${train[@]}" --out k.pt --checkpoint-every 7 --resume > /dev/null 2> k.err ||
    { cat k.err; fail "kill -9 attempt $attempt: the state left behind does not resume"; }
  cmp whole.pt k.pt || fail "kill -9 attempt $attempt: the resumed model differs"
done
echo "kill -9 at 3 random moments: each state resumed to the uninterrupted model"

# 3. Bad requests.
expect() {  # expect CODE PATTERN ARGS...
  local code=$1 pattern=$2
  shift 2
  "$engram" "$@" > /dev/null 2> bad.err
  local got=$?
  [ "$got" = "$code" ] || { cat bad.err; fail "$*: exit $got, not $code"; }
  grep -q -- "$pattern" bad.err || { cat bad.err; fail "$*: the error does not say '$pattern'"; }
}
expect 1 "no training state at .none.pt.ckpt. to resume from" "${train[@]}" --out none.pt --resume
expect 1 "batch is 8, not 4" "${train[@]}" --out part.pt --resume --batch 4
expect 2 "\-\-checkpoint-every must be 0" "${train[@]}" --out x.pt --checkpoint-every -1
expect 2 "\-\-resume is for one model" train primitives --primitive succ --k 5 --out p.pt --resume
expect 2 "\-\-checkpoint-every is for one model" train primitives --primitive succ --k 5 \
  --out p.pt --checkpoint-every 5
echo "bad requests: clear errors"

# 4. Two ranks.
dp=(train npi --task addition --data add.jsonl --steps 400 --batch 4 --hidden 32
    --dist-timeout 30)
# run_ranks [--no-timeout] PREFIX ARGS...: both ranks in the background, pids in pid0 pid1 (those
# of `timeout`, or with --no-timeout of engram itself; the test's own time limit then bounds it).
run_ranks() {
  local bound=(timeout 120)
  [ "$1" = --no-timeout ] && { bound=(); shift; }
  local prefix=$1
  shift
  local port
  port=$(free_port)
  for r in 0 1; do
    (RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      exec "${bound[@]}" "$engram" "$@" > $prefix$r.out 2> $prefix$r.err) &
    eval "pid$r=$!"
  done
}
run_ranks whole "${dp[@]}" --out dp_whole.pt
wait $pid0 && wait $pid1 || { cat whole0.err whole1.err; fail "the two-rank run"; }
run_ranks part "${dp[@]}" --out dp.pt --checkpoint-every 20
wait_for dp.pt.ckpt 60
kill -TERM $pid1  # one rank only: the ranks agree to stop after the same step
wait $pid0; code0=$?
wait $pid1; code1=$?
[ "$code0" = 143 ] && [ "$code1" = 143 ] ||
  { cat part0.err part1.err; fail "two ranks, SIGTERM to rank 1: exits $code0 and $code1"; }
step0=$(sed 's/.*after step \([0-9]*\).*/\1/' part0.err)
step1=$(sed 's/.*after step \([0-9]*\).*/\1/' part1.err)
[ "$step0" = "$step1" ] || fail "the ranks stopped after steps $step0 and $step1"
expect 1 "world_size is 2, not 1" "${dp[@]}" --out dp.pt --resume
run_ranks resumed "${dp[@]}" --out dp.pt --checkpoint-every 20 --resume
wait $pid0 && wait $pid1 || { cat resumed0.err resumed1.err; fail "two ranks resuming"; }
cmp dp_whole.pt dp.pt || fail "the resumed two-rank model differs from the uninterrupted one"
echo "two ranks: SIGTERM to rank 1 stopped both after step $step0; resumed to the same bytes"

# 5. Twice.
run_ranks --no-timeout twice "${dp[@]}" --out twice.pt --checkpoint-every 20
wait_for twice.pt.ckpt 60
kill -STOP $pid0
kill -TERM $pid1
sleep 0.3
kill -TERM $pid1  # the same request
kill -CONT $pid0
wait $pid0; code0=$?
wait $pid1; code1=$?
[ "$code0" = 143 ] && [ "$code1" = 143 ] && grep -q "interrupted by SIGTERM" twice1.err ||
  { cat twice0.err twice1.err; fail "SIGTERM twice within 0.3 s: exits $code0 and $code1"; }
expect 1 "world_size is 2, not 1" "${dp[@]}" --out twice.pt --resume  # a complete state
run_ranks --no-timeout later "${dp[@]}" --out later.pt --checkpoint-every 20
wait_for later.pt.ckpt 60
kill -STOP $pid0
kill -TERM $pid1
sleep 1.5
kill -TERM $pid1  # stop now
wait $pid1; code1=$?
kill -CONT $pid0
wait $pid0; code0=$?
[ "$code1" = 143 ] && ! grep -q interrupted later1.err && [ "$code0" = 1 ] &&
  grep -q "rank 1" later0.err ||
  { cat later0.err later1.err; fail "SIGTERM again after 1.5 s: exits $code0 and $code1"; }
echo "a second SIGTERM: after 0.3 s the same request, after 1.5 s stops the rank at once"

# 6. A TBCNN run that keeps the best model on valid (--valid-every) cannot be resumed: SIGTERM
#    ends it with exit 143, writes no state and does not promise a resume (it did both, and the
#    resume was then refused).
for cls in a b; do
  mkdir -p src/$cls
  for i in 1 2 3 4 5; do printf 'def f%s(x):\n    return x + %s\n' "$i" "$i" > src/$cls/f$i.py; done
done
printf 'def g(x):\n    for i in x:\n        print(i)\n' > src/b/f5.py
"$engram" data code --lang python --src src --out code.corpus > /dev/null || fail "data code"
"$engram" train tbcnn --corpus code.corpus --out best.pt --steps 1000000 --valid-every 5 \
  --embedding 4 --channels 4 --metrics best.m > /dev/null 2> best.err &
pid=$!
wait_for best.m 60
sleep 0.3
kill -TERM $pid
wait $pid
code=$?
[ "$code" = 143 ] || { cat best.err; fail "--valid-every, SIGTERM: exit $code, not 143"; }
grep -q "interrupted by SIGTERM" best.err && ! grep -q -- "--resume" best.err ||
  { cat best.err; fail "--valid-every, SIGTERM: the line promises a resume"; }
[ -e best.pt.ckpt ] && fail "--valid-every, SIGTERM: a state was written that cannot be resumed"
echo "--valid-every: a signal writes no state and promises no resume"
