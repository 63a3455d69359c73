#!/usr/bin/env bash
# Claim (on a GPU machine): training the CIFAR ResNet-18 on the GPU, Engram's tracker (a layer
# over LibTorch's CUDA caching allocator) finds a step's peak within 5% of PyTorch's own
# torch.cuda.max_memory_allocated for the same model and batch, and Engram's step takes at most
# 1.10x PyTorch eager's on the same GPU in the same run; at batch 32 and 256.
# Writes results/gpu_memory_resnet.json (the device among the machine's facts); scripts/gpu-check.sh
# runs it. --quick: batch 8, two steps (the script's own check).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_memory_resnet.json}
batches="32 256"
steps=10
if [ "$quick" = 1 ]; then
  batches="8"
  steps=2
fi
for b in $batches; do
  run_logged bench bench memory --workload resnet --device cuda --batch "$b" --steps "$steps" \
    --json "$work/batch$b.json" > "$work/batch$b.txt"
  cat "$work/batch$b.txt" >&2
done
claim="ResNet-18 on the GPU: tracker's peak within 5% of torch.cuda.max_memory_allocated,"
claim+=" step time at most 1.10x PyTorch eager's"
collect_bench_runs "$claim" \
  $(for b in $batches; do echo "batch$b"; done)
echo "wrote $out"
