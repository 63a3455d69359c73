#!/usr/bin/env bash
# Data for notebooks/npi.ipynb (issue 19): how far each NPI task generalizes beyond its training
# lengths. For addition, addition-primitive (learned full adder), sort, sort-recursive and map
# (with the learned double), seeds 1-3, default training (the sort tasks with npi_sort.sh's
# options): accuracy at a sweep of problem lengths from 1 to 2000 digits (addition) or 1000
# elements (map), the training curve (metrics lines), and for seed 1 the call tree of one query.
# Two runs at a time, each on one thread. Writes results/npi_generalization.json; --quick runs a
# small version whose models learn their task: addition (its default traces, lengths 1..20) exact
# at 30 and 60, sort-recursive and map (traces up to length 4) exact at their short lengths.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/npi_generalization.json}
seeds="1 2 3"
jobs_at_once=2
# task|training options|short lengths:count|long lengths:count|query input
configs=(
  "addition||1,2,3,5,10,20,50,100:50|200,500,1000,2000:10|96+38"
  "addition-primitive||1,2,3,5,10,20,50,100:50|200,500,1000,2000:10|96+38"
  "sort|--batch 1 --steps 2000 --hidden 64|2,3,5,10,20,30:50|50,75,100:10|3,1,4,1,5"
  "sort-recursive|--batch 1 --steps 2000 --hidden 64|2,3,5,10,20,30:50|50,75,100:10|3,1,4,1,5"
  "map||1,2,3,5,10,20,50,100:50|200,500,1000:10|1,2,3"
)
gen_extra=()
if [ "$quick" = 1 ]; then
  seeds="1"
  gen_extra=(--max-len 4 --per-length 8)  # addition: its default traces (below)
  configs=(
    "addition|--steps 1000 --hidden 64|1,2,5,20:5|30,60:2|96+38"
    "sort-recursive|--batch 1 --steps 300 --hidden 64|2,3:5|5:2|3,1,2"
    "map|--steps 300 --hidden 64|1,2,5:5|10:2|1,2,3"
  )
fi
lib=$work/primitives.pt
run_logged primitives train primitives --out "$lib" --primitive fulladd,double >&2

# one_run TASK SEED TRAIN_OPTS SHORT LONG INPUT: data, training, evaluation and (seed 1) a query.
one_run() {
  local task=$1 seed=$2 train=$3 short=$4 long=$5 input=$6
  local name=$task-seed$seed
  local read_train=() extra=() gen=("${gen_extra[@]}")
  read -r -a read_train <<< "$train"
  mapfile -t extra < <(primitive_args "$task" "$lib")
  if [ "$quick" = 1 ] && [ "$task" = addition ]; then gen=(); fi
  run_logged "$name" data gen --task "$task" --seed "$seed" --out "$work/$name.jsonl" \
    "${gen[@]}" > /dev/null
  train_timed "$name" --task "$task" --seed "$seed" --data "$work/$name.jsonl" \
    --out "$work/$name.pt" "${read_train[@]}" > "$work/$name.secs"
  local e
  for e in "$short" "$long"; do
    run_logged "$name" eval npi --model "$work/$name.pt" --task "$task" --length "${e%%:*}" \
      --count "${e##*:}" --seed "$seed" --threads 1 "${extra[@]}" --json \
      > "$work/$name.eval-${e%%,*}.json"
  done
  if [ "$seed" = 1 ]; then
    run_logged "$name" run --model "$work/$name.pt" --task "$task" --input "$input" \
      "${extra[@]}" --json > "$work/$name.run.json"
  fi
}

names=()
for config in "${configs[@]}"; do
  IFS='|' read -r task train short long input <<< "$config"
  for seed in $seeds; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n || true; done
    one_run "$task" "$seed" "$train" "$short" "$long" "$input" &
    names+=("$task-seed$seed")
  done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || true; done
collect_curves "generalization: accuracy against problem length beyond the training lengths (addition and addition-primitive 1..20, sort 2..20, map up to 10), seeds 1-3, default options, with training curves and one call tree per task" \
  "${names[@]}"
echo "wrote $out"
