#!/usr/bin/env bash
# Claims (issue 35's larger workload, on the CPU): ImageNet's ResNet-50 (bottleneck blocks,
# 224x224 synthetic images, 1000 classes, batch 8), every memory technique in one invocation,
# each row a fresh model from the same seed on the same batch: none, relu, recompute, swap,
# reuse, algo and all (relu + recompute + swap, every unit treated: no budget), beside
# torch.profiler's count of the same step and PyTorch's checkpointing of the same units
# (torch.utils.checkpoint, both modes). Every lossless row trains none's gradients bit for bit
# (algo is lossy: its error is recorded); the activation peaks are exactly counted, so the rows'
# ratios are what the same techniques free on a GPU (scripts/reproduce/gpu_memory_resnet50.sh
# measures them there, where cuDNN's workspaces and the allocator's rounding join them). Timings
# are this machine's, recorded, never asserted. Writes results/memory_resnet50.json.
# --quick: batch 2 at 64x64, one measured step.
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/memory_resnet50.json}
extra=(--batch 8 --steps 3)
if [ "$quick" = 1 ]; then
  extra=(--batch 2 --image-size 64 --steps 1)
fi
run_logged bench bench memory --workload resnet50 \
  --techniques none,relu,recompute,swap,reuse,algo,all --json "$work/bench.json" \
  "${extra[@]}" > "$work/bench.txt"
cat "$work/bench.txt" >&2
collect_bench_runs "ResNet-50 at 224x224 on the CPU: every memory technique's activation peak and\
 step time against none's, exactly counted, beside torch.profiler and torch.utils.checkpoint" bench
echo "wrote $out"
