#!/usr/bin/env bash
# Prediction (on paper, no GPU needed; issue "The gradient exchange on GPUs"): the data-parallel
# step of ResNet-18 and ResNet-50 on 8 GPUs over NVLink and 64 and 512 over 100/400 Gb/s, for
# after, overlap and ooo, from the one-GPU profile a GPU machine measured
# (results/gpu_ooo_streams.json, `engram bench streams`) and the ring all-reduce's cost
# (docs/ARCHITECTURE.md, "The data-parallel step at scale, on paper"); with the one-GPU
# prediction checked against that run's measured step. The links are assumptions the output
# names. Writes results/gpu_scaling.json. --quick: the same (it takes a second).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_scaling.json}
from=${ENGRAM_SCALING_FROM:-$root/results/gpu_ooo_streams.json}
[ -e "$from" ] || { echo "gpu_scaling.sh: $from is not there: run scripts/gpu-check.sh on a GPU machine and commit its gpu_ooo_streams.json first" >&2; exit 1; }
run_logged bench bench scale --from "$from" --json "$work/scale.json" >&2
collect_bench_runs "the data-parallel step at 8, 64 and 512 GPUs predicted from one GPU's profile" scale
echo "wrote $out"
