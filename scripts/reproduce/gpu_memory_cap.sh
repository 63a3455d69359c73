#!/usr/bin/env bash
# Measurement (on a GPU machine): ResNet-50 at 224x224 under a device-memory cap of 8 GiB (the
# caching allocator limited to it, as torch.cuda.set_per_process_memory_fraction limits
# PyTorch's): the largest batch that trains for none, all (relu + recompute + swap), relu,
# recompute and swap (recompute and swap planned per unit under the cap), each trial a fresh
# session of one warm-up and one measured step, the search aimed at the cap by what the trials
# reserved (bench/BatchSearch.h); at each largest batch images/s, live and
# reserved peak; beside them PyTorch eager, torch.utils.checkpoint in both modes and selective
# activation checkpointing under the same cap with the same search; and all against the
# fastest PyTorch variant at the equal batch. The goals of issue 35 (all at least 2.5x none's
# batch, no slower than the fastest peer at the equal batch) are judged in the report's `goals`,
# never asserted. Not algo: its planning measures every cuDNN algorithm of every
# layer again at each trial's batch (gpu_memory_resnet50.sh measures it at fixed batches).
# Writes results/gpu_memory_cap.json (the device among the machine's facts); scripts/gpu-check.sh
# runs it. Batches up to 512: a swap row's pinned host buffers grow with the batch, and the GPU
# machine has 128 GiB of host memory, which pinned buffers must not exhaust. Under gpu-check,
# whose stage gives it STAGE_SECONDS, no trial starts in the last 60 s (`--time-limit`): a cut
# run still writes its JSON, whose `complete` says whether anything was cut and what (and the
# claim says it was cut).
# --quick: ResNet-18 at 32x32 under 1 GiB, at most batch 256 (the script's own check).
source "$(dirname "$0")/common.sh"
out=${out:-$root/results/gpu_memory_cap.json}
args=(--workload resnet50 --memory-cap 8GiB --max-batch 512 --batch 32 --steps 1)
if [ "$quick" = 1 ]; then
  args=(--workload resnet --memory-cap 1GiB --max-batch 256 --batch 16 --steps 1)
fi
if [ -n "${STAGE_SECONDS:-}" ]; then
  args+=(--time-limit "$(( STAGE_SECONDS > 90 ? STAGE_SECONDS - 60 : 30 ))")
fi
# The table into the log as it comes, so that a run its stage cuts short still shows it.
run_logged bench bench memory --device cuda --find-max-batch "${args[@]}" \
  --techniques none,all,relu,recompute,swap --json "$work/cap.json" | tee "$work/cap.txt" >&2
claim="ResNet-50 at 224x224 under an 8 GiB device-memory cap: the largest batch that trains for"
claim+=" none, all, relu, recompute and swap, beside PyTorch eager, checkpointing and selective"
claim+=" checkpointing under the same cap"
if ! python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("complete", True)
                  else 1)' "$work/cap.json"; then
  claim+=" (cut short by the time limit: what was cut is in the run)"
fi
collect_bench_runs "$claim" cap
echo "wrote $out"
