#!/usr/bin/env bash
# Claim (lower-memory algorithm replacement on a GPU): every convolution of the CIFAR ResNet-18 at
# batch 32, with each of cuDNN's algorithms for forward, backward data and backward filter
# (float32, no TF32): workspace, median time of 10 runs (CUDA events), and the largest
# difference from the default algorithm's result (cuDNN's heuristic choice, as PyTorch without
# benchmark mode). Then the planner's per-layer choice within workspace limits of 0, 1, 4 and
# 16 MiB: peak workspace, the convolutions' time per step against the defaults, the layers
# replaced. Runs on a GPU machine (scripts/gpu-check.sh runs it there); without a device it fails
# and leaves the results file alone. Writes results/gpu_cudnn_conv.json (--out FILE: there), with the
# commit (ENGRAM_REPRO_COMMIT where the tree has no .git), the command and the machine inside.
#   ENGRAM_CUDNN_CONV_BENCH=PATH   the benchmark (default build/bench/engram_cudnn_conv_bench)
name=cudnn_conv
bench=${ENGRAM_CUDNN_CONV_BENCH:-$(cd "$(dirname "$0")/../.." && pwd)/build/bench/engram_cudnn_conv_bench}
source "$(dirname "$0")/gpu_common.sh"
run_gpu_bench --batch 32 --repeats 10 --limits-mb 0,1,4,16
