#!/usr/bin/env bash
# Measurement (on a GPU machine, issue "The gradient exchange on GPUs"): out-of-order backprop on
# one GPU, `engram bench streams`: the CIFAR ResNet-18 at batch 256 and ResNet-50 at 224x224 and
# batch 64 trained with the weight gradients on a second CUDA stream (--ooo-streams 2) against
# one stream, in alternating sessions of one process, each step timed to the end of its kernels;
# beside each, the one-GPU step model's prediction (the backward's stretches on one stream, the
# weight-gradient tasks moved to a second) and the share of it the measurement realised. Timings
# are recorded, never asserted.
# Writes results/gpu_ooo_streams.json (the device among the machine's facts); scripts/gpu-check.sh
# runs it. --quick: ResNet-18 at batch 4 and ResNet-50 at batch 2, one step of each kind (the
# script's own check).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_ooo_streams.json}
runs=("resnet 256" "resnet50 64")
steps=(--warmup 3 --steps 10 --rounds 2)
if [ "$quick" = 1 ]; then
  runs=("resnet 4" "resnet50 2")
  steps=(--warmup 1 --steps 1 --rounds 1)
fi
names=()
for run in "${runs[@]}"; do
  set -- $run
  name=$1-batch$2
  run_logged bench bench streams --workload "$1" --batch "$2" --device cuda "${steps[@]}" \
    --json "$work/$name.json" | tee "$work/$name.txt" >&2
  names+=("$name")
done
collect_bench_runs "out-of-order backprop on one GPU: the weight gradients on a second CUDA stream against one, beside the step model" "${names[@]}"
echo "wrote $out"
