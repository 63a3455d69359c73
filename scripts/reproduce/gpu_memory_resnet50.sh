#!/usr/bin/env bash
# Measurement (on a GPU machine): ResNet-50 in its ImageNet layout (224x224 synthetic images,
# 1000 classes) trained on the GPU at batch 64 and 128: with no memory technique, Engram's tracked
# peak beside PyTorch's torch.cuda.max_memory_allocated for the same network and batch, the
# allocator's reserved bytes, and the step time against PyTorch eager's, in the same run; beside
# it the techniques that act on device memory (relu, recompute, swap to pinned host memory, reuse
# from a planned device arena, algo with cuDNN's least-workspace algorithms, all), each row's
# peaks and time against none's and whether it trained none's bits (every row deterministic; algo
# within float rounding only), the swap rows' copy rates against the bus's measured peak, the
# reuse row's arena against its lower bound. Timings and peaks are recorded, never asserted.
# Writes results/gpu_memory_resnet50.json (the device among the machine's facts);
# scripts/gpu-check.sh runs it. --quick: batch 2 at 64x64, two steps (the script's own check).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_memory_resnet50.json}
batches="64 128"
steps=5
size=()
if [ "$quick" = 1 ]; then
  batches="2"
  steps=2
  size=(--image-size 64)
fi
claim="ResNet-50 at 224x224 on the GPU: tracked peak, reserved bytes and step time beside"
claim+=" PyTorch eager's, and relu, recompute, swap, reuse, algo and all on device memory against"
claim+=" none"
# Collected after each batch, so that a run cut short (gpu-check's deadline) keeps the batches
# it finished; its runs say which.
done_batches=()
for b in $batches; do
  run_logged bench bench memory --workload resnet50 --device cuda --batch "$b" --steps "$steps" \
    --techniques none,relu,recompute,swap,reuse,algo,all "${size[@]}" --json "$work/batch$b.json" \
    | tee "$work/batch$b.txt" >&2
  done_batches+=("batch$b")
  done_claim=$claim
  [ "${#done_batches[@]}" -lt "$(wc -w <<< "$batches")" ] &&
    done_claim+=" (so far: ${done_batches[*]} of the batches $batches)"
  collect_bench_runs "$done_claim" "${done_batches[@]}"
done
echo "wrote $out"
