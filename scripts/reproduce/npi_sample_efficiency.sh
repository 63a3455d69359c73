#!/usr/bin/env bash
# Claim (issue 22): how few traces each NPI task needs. For addition, addition-primitive (the
# column step applies the learned full adder), sort-recursive and map (with the learned double),
# trace budgets of 640, 320, 160, 80, 40 and 20 spread evenly over the training lengths
# (`data gen --traces N`), seeds 1-3, default training: accuracy at 20, 100 and 1000 (sort-recursive:
# 20 and 100; its bubble passes make 1000 elements a million calls), 100 problems each; for each
# task, the smallest budget from which on (that budget and every larger one) every seed is exact
# at 100, and at 1000. Then, where plain
# addition fails, what its first divergences are and what a user would try first with the same
# traces: four times the steps, a curriculum (shortest traces first, --curriculum 0.5), a smaller
# core (--hidden 64).
# Writes results/npi_sample_efficiency.json (and again, complete, after the remedies).
# --jobs N runs N trainings at a time, each on one thread; --work DIR keeps the runs in DIR and a
# run started again with the same DIR skips what is done (each run records its commit).
# --quick: one seed, budgets 20 and 8, small models and lengths (the claims test): with 20 traces
# addition-primitive is exact at 5 and 10, map at both budgets; plain addition, a 32-wide core
# for 100 steps, fails, so the remedies run too.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/npi_sample_efficiency.json}
seeds="1 2 3"
budgets="640 320 160 80 40 20"
count=100
# task|training options|evaluation lengths
configs=(
  "addition||20,100,1000"
  "addition-primitive||20,100,1000"
  "sort-recursive||20,100"
  "map||20,100,1000"
)
remedy_steps=8000  # four times the default
remedy_small="--hidden 64"
remedy_long="--steps $remedy_steps"
remedy_curriculum="--curriculum 0.5"
gen_extra=()
if [ "$quick" = 1 ]; then
  seeds="1"
  budgets="20 8"
  count=5
  gen_extra=(--max-len 4)
  configs=(
    "addition|--steps 100 --hidden 32|5,10"
    "addition-primitive|--steps 300 --hidden 64|5,10"
    "sort-recursive|--steps 300 --hidden 64|3,5"
    "map|--steps 300 --hidden 64|5,10"
  )
  remedy_steps=400
  remedy_small="--steps 100 --hidden 16"
  remedy_long="--steps $remedy_steps --hidden 32"
  remedy_curriculum="--steps 100 --hidden 32 --curriculum 0.5"
fi
lib=$work/primitives.pt
if [ ! -s "$lib" ]; then
  run_logged primitives train primitives --out "$lib" --primitive fulladd,double >&2
fi

# one_run NAME TASK SEED BUDGET TRAIN_OPTS LENGTHS: traces, training and one evaluation at every
# length; NAME.done (seconds and commit) marks it finished, and a finished run is skipped.
one_run() {
  local name=$1 task=$2 seed=$3 budget=$4 train=$5 lengths=$6
  [ -s "$work/$name.done" ] && return 0
  local read_train=() extra=()
  read -r -a read_train <<< "$train"
  mapfile -t extra < <(primitive_args "$task" "$lib")
  rm -f "$work/$name.cmd" "$work/$name.pt" "$work/$name.eval.json"
  # Each step checked by hand: set -e does not reach into a function run in an || list or a
  # command substitution, and a run marked done is never run again.
  run_logged "$name" data gen --task "$task" --seed "$seed" --traces "$budget" \
    --out "$work/$name.jsonl" "${gen_extra[@]}" > /dev/null || return 1
  local secs
  secs=$(train_timed "$name" --task "$task" --seed "$seed" --data "$work/$name.jsonl" \
    --out "$work/$name.pt" "${read_train[@]}") || return 1
  [ -s "$work/$name.pt" ] || return 1
  run_logged "$name" eval npi --model "$work/$name.pt" --task "$task" --length "$lengths" \
    --count "$count" --seed "$seed" --threads 1 "${extra[@]}" --json \
    > "$work/$name.eval.json" || return 1
  /usr/bin/python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$work/$name.eval.json" ||
    return 1
  printf '{"train_seconds": %s, "commit": "%s"}\n' "$secs" "$ENGRAM_REPRO_COMMIT" \
    > "$work/$name.done.tmp"
  mv "$work/$name.done.tmp" "$work/$name.done"
}

names=()
for config in "${configs[@]}"; do
  IFS='|' read -r task train lengths <<< "$config"
  if [ "$task" = addition ]; then addition_lengths=$lengths; fi
  for budget in $budgets; do
    for seed in $seeds; do
      name=$task-n$budget-s$seed
      names+=("$name|$task|$seed|$budget|")
      start_job one_run "$name" "$task" "$seed" "$budget" "$train" "$lengths"
    done
  done
done
finish_jobs

claim="sample efficiency: accuracy at 20, 100 and 1000 against the number of training traces (budgets $budgets, spread evenly over the training lengths), seeds $seeds, default training, for addition, addition-primitive (learned full adder), sort-recursive and map (learned double); the smallest budget at which every seed is exact; where plain addition fails, its first divergences and the remedies a user would try first"
collect() {
  /usr/bin/python3 "$root/scripts/reproduce/sample_efficiency.py" "$out" "$claim" "$work" \
    "${names[@]}"
}
collect

# Remedies: at the largest budget where plain addition is inexact at 100 for some seed, each such
# seed again with a curriculum and with a smaller core, and the first of them with four times the
# steps (the costliest).
remedy_budget="" remedy_seeds=""
failing=$(/usr/bin/python3 "$root/scripts/reproduce/sample_efficiency.py" --failing addition \
  "$work" "${names[@]}")
read -r remedy_budget remedy_seeds <<< "$failing" || true
if [ -n "${remedy_budget:-}" ]; then
  lengths=$addition_lengths
  first=1
  for seed in ${remedy_seeds//,/ }; do
    name=addition-n$remedy_budget-s$seed-curriculum
    names+=("$name|addition|$seed|$remedy_budget|curriculum: $remedy_curriculum")
    start_job one_run "$name" addition "$seed" "$remedy_budget" "$remedy_curriculum" "$lengths"
    name=addition-n$remedy_budget-s$seed-smaller
    names+=("$name|addition|$seed|$remedy_budget|smaller core: $remedy_small")
    start_job one_run "$name" addition "$seed" "$remedy_budget" "$remedy_small" "$lengths"
    if [ "$first" = 1 ]; then
      name=addition-n$remedy_budget-s$seed-longer
      names+=("$name|addition|$seed|$remedy_budget|more steps: $remedy_long")
      start_job one_run "$name" addition "$seed" "$remedy_budget" "$remedy_long" "$lengths"
      first=0
    fi
  done
  finish_jobs
  collect
fi
echo "wrote $out"
