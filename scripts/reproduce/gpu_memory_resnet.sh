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
ENGRAM_ROOT="$root" BATCHES="$batches" /usr/bin/env python3 - "$out" "$work" <<'PY'
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("ENGRAM_ROOT", "."), "scripts", "reproduce"))
from collect import bench_run, write_result

out, work = sys.argv[1], sys.argv[2]
runs = []
for b in os.environ["BATCHES"].split():
    run, commands = bench_run(work, f"batch{b}")
    runs.append(run)
write_result(out, "ResNet-18 on the GPU: tracker's peak within 5% of torch.cuda.max_memory_allocated, "
             "step time at most 1.10x PyTorch eager's", {"runs": runs, "commands": commands})
PY
echo "wrote $out"
