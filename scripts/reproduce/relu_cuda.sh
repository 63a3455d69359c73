#!/usr/bin/env bash
# Claim (ReLU compression on a GPU): the CUDA kernels (memory/cuda/) compress and decompress a
# tensor of 8M floats at sparsities 0, 0.5 and 0.9, every round trip checked bit for bit, and
# their throughput against a device-to-device cudaMemcpy of the same dense bytes, each the median
# of 20 runs timed with CUDA events. Runs on a GPU machine (scripts/gpu-check.sh runs it there);
# without a device it fails and leaves the results file alone. Writes results/gpu_relu_cuda.json (--out FILE:
# there), with the commit (ENGRAM_REPRO_COMMIT where the tree has no .git), the command and the
# machine (GPU, driver, CPU) inside.
#   ENGRAM_RELU_CUDA_BENCH=PATH   the benchmark binary (default build/bench/engram_relu_cuda_bench)
name=relu_cuda
bench=${ENGRAM_RELU_CUDA_BENCH:-$(cd "$(dirname "$0")/../.." && pwd)/build/bench/engram_relu_cuda_bench}
source "$(dirname "$0")/gpu_common.sh"
run_gpu_bench --elements 8388608 --repeats 20
