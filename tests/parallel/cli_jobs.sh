#!/usr/bin/env bash
# `engram train` as a data-parallel job, end to end, on loopback:
#   1. torchrun --nproc_per_node 2 --no_python engram train npi ...           (one "node")
#   2. two torchrun invocations with --nnodes 2 on 127.0.0.1                  (two "nodes")
#      -> both train and write the same model file, byte for byte; the same two nodes each given
#      its own data, the copies differing (another seed) -> both stop at start naming the data.
#   3. the memory techniques (relu, recompute, swap) on 2 ranks: lossless, so the same model again;
#      primitives (whose stop-when-exact callback runs on one rank) and TBCNN train on 2 ranks.
#   4. two ranks started by hand (torchrun's variables); rank 1 is killed with SIGKILL mid-
#      training -> rank 0 exits 1 within --dist-timeout with one line naming rank 1, and no
#      model file (complete or partial) is left.
# Usage: cli_jobs.sh ENGRAM_BINARY WORK_DIR
set -euo pipefail
engram=$1
work=$2/cli_jobs.$$
mkdir -p "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
# A loopback port no one listens on now (a pid-derived one can be a concurrent test's ephemeral port).
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

"$engram" data gen --task addition --out traces.jsonl --per-length 4 --max-len 8 >/dev/null
train=(train npi --task addition --data traces.jsonl --steps 12 --batch 2 --hidden 32 --seed 3)

# The pinned environment's torchrun (ctest sets ENGRAM_TORCHRUN: tests/parallel/CMakeLists.txt).
torchrun=${ENGRAM_TORCHRUN:?names the torchrun of the pinned environment}

timeout 120 "$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port $(free_port) \
  --no_python "$engram" "${train[@]}" --out one_node.pt > one_node.log 2>&1 ||
  { cat one_node.log; fail "torchrun --nproc_per_node 2"; }
grep -q "wrote one_node.pt" one_node.log || { cat one_node.log; fail "rank 0 did not write"; }

pids=()
nodes_port=$(free_port)
for node in 0 1; do
  timeout 120 "$torchrun" --nnodes 2 --node_rank $node --nproc_per_node 1 \
    --master_addr 127.0.0.1 --master_port "$nodes_port" --no_python \
    "$engram" "${train[@]}" --out two_nodes.pt > node$node.log 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { cat node0.log node1.log; fail "two-node torchrun"; }; done
cmp one_node.pt two_nodes.pt || fail "one node and two nodes wrote different models"
echo "torchrun: one node and two nodes wrote the same model ($(stat -c %s one_node.pt) bytes)"

# Each node reads its own copy of the data: copies that differ (another seed, the same task,
# lengths and count) stop both ranks at start, naming what differs, and no model is written.
"$engram" data gen --task addition --out other.jsonl --per-length 4 --max-len 8 --seed 7 >/dev/null
pids=()
mixed_port=$(free_port)
for node in 0 1; do
  data=traces.jsonl
  [ $node = 1 ] && data=other.jsonl
  timeout 120 "$torchrun" --nnodes 2 --node_rank $node --nproc_per_node 1 \
    --master_addr 127.0.0.1 --master_port "$mixed_port" --no_python \
    "$engram" train npi --task addition --data "$data" --steps 12 --batch 2 --hidden 32 \
    --seed 3 --out mixed.pt > mixed$node.log 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do
  if wait "$p"; then cat mixed0.log mixed1.log; fail "ranks with different data trained"; fi
done
grep -q "the ranks disagree on the contents of the data file" mixed0.log mixed1.log ||
  { cat mixed0.log mixed1.log; fail "the refusal does not name the data"; }
[ ! -e mixed.pt ] || fail "ranks with different data wrote a model"
echo "torchrun: nodes with different data stop at start, naming it"

"$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port $(free_port) \
  --no_python "$engram" "${train[@]}" --memory relu,recompute,swap \
  --out techniques.pt > techniques.log 2>&1 || { cat techniques.log; fail "--memory on 2 ranks"; }
cmp one_node.pt techniques.pt || fail "relu, recompute and swap changed the 2-rank model"
echo "memory techniques on 2 ranks: the same model"

"$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port $(free_port) \
  --no_python "$engram" train primitives --primitive succ,double,square --k 5 --out prims.pt \
  > prims.log 2>&1 || { cat prims.log; fail "train primitives on 2 ranks"; }
# Three families, three sessions in one job: each on the job the first one joined.
for f in succ double square; do
  grep -q "$f.*exact" prims.log || { cat prims.log; fail "$f not exact on 2 ranks"; }
done
"$engram" eval primitives --model prims.pt --json > prims.json
grep -q '"exact": *true' prims.json || { cat prims.json; fail "the 2-rank library is not exact"; }

for cls in arith loops; do
  mkdir -p src/$cls
  for i in 0 1 2 3 4 5 6 7; do
    if [ $cls = arith ]; then body="def f$i(x):\n    return x + $i\n"
    else body="def h$i():\n    for i in range($i):\n        print(i)\n"; fi
    printf "$body" > src/$cls/f$i.py
  done
done
"$engram" data code --lang python --src src --out c.corpus > /dev/null
"$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port $(free_port) \
  --no_python "$engram" train tbcnn --corpus c.corpus --out t.pt --steps 20 \
  --channels 16 --embedding 8 --batch 2 > tbcnn.log 2>&1 || { cat tbcnn.log; fail "train tbcnn on 2 ranks"; }
"$engram" eval tbcnn --model t.pt --corpus c.corpus --split train --json > /dev/null
echo "primitives and TBCNN trained on 2 ranks"

# A rank killed mid-training.
killed_port=$(free_port)
long=(train npi --task addition --data traces.jsonl --steps 1000000 --batch 2 --hidden 32
      --dist-timeout 20 --out killed.pt)
for r in 0 1; do
  (RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$killed_port \
    exec "$engram" "${long[@]}" > rank$r.out 2> rank$r.err) &
  eval "pid$r=$!"
done
# Bound the test if rank 0 never gives up (no output: it must not hold the test's stdout open).
(sleep 90; kill -9 "$pid0" "$pid1") > /dev/null 2>&1 &
watchdog=$!
sleep 4
kill -9 "$pid1"
killed_at=$(date +%s%N)
set +e
wait "$pid0" 2>/dev/null
code=$?
set -e
elapsed_ms=$(( ($(date +%s%N) - killed_at) / 1000000 ))
kill "$watchdog" 2>/dev/null || true
[ "$code" = 1 ] || { cat rank0.err; fail "rank 0 exited $code, not 1"; }
[ "$(wc -l < rank0.err)" = 1 ] || { cat rank0.err; fail "rank 0's error is not one line"; }
grep -q "rank 1 stopped answering" rank0.err || { cat rank0.err; fail "rank 1 not named"; }
(( elapsed_ms < 20000 )) || fail "rank 0 took ${elapsed_ms} ms after the kill"
if ls killed.pt* 2>/dev/null; then fail "a model file was left"; fi
echo "killed rank: rank 0 exited 1 ${elapsed_ms} ms after the kill: $(cat rank0.err)"
