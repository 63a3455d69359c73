#!/usr/bin/env bash
# Data for notebooks/npi.ipynb (issue 19), the sort tasks to 1000 elements: sort and
# sort-recursive, seeds 1-3, trained as npi_generalization.sh trains them (npi_sort.sh's
# options: batch 1, 2000 steps, hidden 64, lengths 2..20), evaluated from 2 to 1000 elements.
# Their traces grow quadratically with the length (bubble sort), so the long lengths get few
# problems: 50 up to 30 elements, 10 up to 100, 2 at 200 and 500, 1 at 1000 (about 6 minutes of
# one core per model at 1000). The notebook draws these runs for the sort tasks in place of
# npi_generalization.json's, which stop at 100. Two runs at a time, each on one thread; resumes
# with --work. Writes results/npi_generalization_sort.json; --quick runs a tiny version.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/npi_generalization_sort.json}
seeds="1 2 3"
tasks="sort sort-recursive"
train=(--batch 1 --steps 2000 --hidden 64)
evals=("2,3,5,10,20,30:50" "50,75,100:10" "200,500:2" "1000:1")
gen_extra=()
if [ "$quick" = 1 ]; then
  seeds="1" tasks="sort-recursive" train=(--batch 1 --steps 100 --hidden 32)
  evals=("2,3:5" "5:2") gen_extra=(--max-len 4 --per-length 8)
fi

# one_run NAME TASK SEED: data, training and every evaluation (each skipped when its file is
# there).
one_run() {
  local name=$1 task=$2 seed=$3 e
  if [ ! -s "$work/$name.secs" ]; then
    run_logged "$name" data gen --task "$task" --seed "$seed" --out "$work/$name.jsonl" \
      "${gen_extra[@]}" > /dev/null
    train_timed "$name" --task "$task" --seed "$seed" --data "$work/$name.jsonl" \
      --out "$work/$name.pt" "${train[@]}" > "$work/$name.secs.partial"
    mv "$work/$name.secs.partial" "$work/$name.secs"
  fi
  for e in "${evals[@]}"; do
    local file=$work/$name.eval-${e%%,*}.json
    [ -s "$file" ] && continue
    run_logged "$name" eval npi --model "$work/$name.pt" --task "$task" --length "${e%%:*}" \
      --count "${e##*:}" --seed "$seed" --threads 1 --json > "$file.partial"
    mv "$file.partial" "$file"
  done
}

names=()
for task in $tasks; do
  for seed in $seeds; do
    start_job one_run "$task-seed$seed" "$task" "$seed"
    names+=("$task-seed$seed")
  done
done
finish_jobs
collect_curves "generalization of the sort tasks to 1000 elements: accuracy against problem length beyond the training lengths (2..20), seeds 1-3" \
  "${names[@]}"
echo "wrote $out"
