#!/usr/bin/env bash
# Measurement (on a machine with two GPUs or more, issue "The gradient exchange on GPUs"): NCCL on
# every GPU of the machine, one rank each, `engram bench dp --device cuda --dist-backend nccl`:
# the CIFAR ResNet-18 (per-rank batch 128) and the addition NPI (per-rank batch 32), schedules
# none, after, overlap and ooo, beside PyTorch DDP over NCCL (the same buckets) in the same run,
# on the machine's own links between its GPUs (NVLink or PCIe; nothing emulated). Timings are
# recorded, never asserted. Writes results/gpu_dp_nccl.json (the device among the machine's
# facts); scripts/gpu-check.sh runs it where the machine has two GPUs or more. With fewer it stops
# with bench dp's usage error naming the GPUs it sees, and writes nothing. --quick: small
# batches, one timed step (the script's own check).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_dp_nccl.json}
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
ranks=$((gpus > 2 ? gpus : 2))  # fewer than two: bench dp says what is missing
sizes=(--resnet-batch 128 --npi-batch 32 --steps 10 --warmup 3)
if [ "$quick" = 1 ]; then
  sizes=(--resnet-batch 4 --npi-batch 2 --hidden 32 --steps 1 --warmup 1)
fi
run_logged bench bench dp --device cuda --dist-backend nccl --ranks "$ranks" --models resnet,npi \
  --schedules none,after,overlap,ooo --links 0 "${sizes[@]}" --json "$work/nccl.json" \
  > "$work/nccl.txt"
cat "$work/nccl.txt" >&2
collect_bench_runs "NCCL on every GPU of the machine, one rank each: the gradient schedules none, after, overlap and ooo beside PyTorch DDP over NCCL" nccl
echo "wrote $out"
