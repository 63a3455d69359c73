#!/usr/bin/env bash
# Claim: addition trained on 2 ranks (torchrun --nproc_per_node 2 on this machine, Gloo, default
# options: per-rank batch 8, so a global batch of 16) reaches accuracy 1.0 at length 1000 (100
# problems) and length 100 (1000 problems), like one process (results/npi_addition.json).
# Writes results/dp_learning.json. --quick: a 64-wide core for 1000 steps (as npi_addition.sh's),
# 10 problems at length 30, beyond the training lengths: the 2-rank model is exact there too.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/dp_learning.json}
train_extra=()
evals=("100:1000" "1000:100")
if [ "$quick" = 1 ]; then
  train_extra=(--steps 1000 --hidden 64)
  evals=("30:10")
fi
name="ranks2"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run_logged "$name" data gen --task addition --out "$work/$name.jsonl" --seed 1 >/dev/null
start=$(date +%s%N)
cmd=("$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" --no_python
     "$engram" train npi --task addition --data "$work/$name.jsonl"
     --out "$work/$name.pt" --seed 1 --metrics "$work/$name.metrics.jsonl" "${train_extra[@]}")
echo "+ ${cmd[*]/#$engram/engram}" | tee -a "$work/$name.cmd" >&2
"${cmd[@]}" > "$work/$name.train.txt" 2>&1 || { cat "$work/$name.train.txt" >&2; exit 1; }
secs=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1f", ns / 1e9 }')
for e in "${evals[@]}"; do
  run_logged "$name" eval npi --model "$work/$name.pt" --task addition --length "${e%%:*}" \
    --count "${e##*:}" --seed 1 --threads 1 --json > "$work/$name.eval-${e%%:*}.json"
done
/usr/bin/python3 "$root/scripts/reproduce/collect.py" "$out" \
  "addition on 2 ranks (torchrun, Gloo, default options): accuracy 1.0 at length 100 (1000 problems) and 1000 (100 problems)" \
  "$work" "$name=$secs"
echo "wrote $out"
