#!/usr/bin/env bash
# Claim: addition NPIs trained with the default options, for seeds 1, 2 and 3, each within 20 minutes
# on 2 cores, score accuracy 1.0 at length 100 (1000 problems) and length 1000 (100 problems).
# Writes results/npi_addition.json. --quick: one seed, a small model and short lengths (the `claims`
# test label runs this to check the script itself), written to --out or a temporary file.
# ADDITION_TASK=addition-primitive (npi_addition_primitive.sh) makes the same claim for addition
# whose column arithmetic is the learned full-adder primitive (results/npi_addition_primitive.json).
source "$(dirname "$0")/common.sh"
task=${ADDITION_TASK:-addition}
out=${out:-$root/results/npi_${task//-/_}.json}
eval_extra=()
if [ "$task" = addition-primitive ]; then
  run_logged primitives train primitives --out "$work/primitives.pt" --primitive fulladd >&2
  eval_extra=(--primitives "$work/primitives.pt")
fi
seeds="1 2 3"
train_extra=()
evals=("100:1000" "1000:100")
if [ "$quick" = 1 ]; then
  seeds="1"
  train_extra=(--steps 1000 --hidden 64)  # learns addition: accuracy 1.0 at length 30 and 60
  evals=("30:10" "60:5")
fi
runs=()
for seed in $seeds; do
  name="seed$seed"
  run_logged "$name" data gen --task "$task" --out "$work/$name.jsonl" --seed "$seed" >/dev/null
  secs=$(train_timed "$name" --task "$task" --data "$work/$name.jsonl" --out "$work/$name.pt" \
    --seed "$seed" "${train_extra[@]}")
  for e in "${evals[@]}"; do
    run_logged "$name" eval npi --model "$work/$name.pt" --task "$task" --length "${e%%:*}" \
      --count "${e##*:}" --seed "$seed" --threads 1 "${eval_extra[@]}" --json \
      > "$work/$name.eval-${e%%:*}.json"
  done
  runs+=("$name=$secs")
done
/usr/bin/python3 "$root/scripts/reproduce/collect.py" "$out" \
  "$task: accuracy 1.0 at length 100 (1000 problems) and 1000 (100 problems), seeds 1-3, default options" \
  "$work" "${runs[@]}"
echo "wrote $out"
