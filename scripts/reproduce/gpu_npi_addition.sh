#!/usr/bin/env bash
# Claim (on a GPU machine): an addition NPI trained on the GPU (--device cuda, default options,
# seed 1) scores accuracy 1.0 at length 100 (1000 problems) and length 1000 (100 problems), each
# evaluated on the GPU. Writes results/gpu_npi_addition.json, with the device (nvidia-smi) among
# the machine's facts. scripts/gpu-check.sh runs it. --quick: fewer steps, a small model and short
# lengths (the script's own check).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_npi_addition.json}
train_extra=()
evals=("100:1000" "1000:100")
if [ "$quick" = 1 ]; then
  train_extra=(--steps 300 --hidden 64)
  evals=("10:10")
fi
name=seed1
run_logged "$name" data gen --task addition --out "$work/$name.jsonl" --seed 1 > /dev/null
secs=$(train_timed "$name" --task addition --data "$work/$name.jsonl" --out "$work/$name.pt" \
  --seed 1 --device cuda "${train_extra[@]}")
for e in "${evals[@]}"; do
  run_logged "$name" eval npi --model "$work/$name.pt" --task addition --length "${e%%:*}" \
    --count "${e##*:}" --seed 1 --device cuda --json > "$work/$name.eval-${e%%:*}.json"
done
/usr/bin/env python3 "$root/scripts/reproduce/collect.py" "$out" \
  "addition trained on the GPU: accuracy 1.0 at length 100 (1000 problems) and 1000 (100 problems), seed 1, default options" \
  "$work" "$name=$secs"
echo "wrote $out"
