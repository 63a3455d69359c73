#pragma once
/// \file
/// The throughput figures of a compression kernel beside a memcpy of the same dense bytes, as
/// both ReLU-compression benchmarks report them (the CPU kernels in `engram bench memory`, the
/// CUDA kernels in engram_relu_cuda_bench). Header-only and torch-free: the CUDA benchmark has
/// no torch.

#include <nlohmann/json.hpp>

namespace engram::bench {

/// compress_ms, decompress_ms, memcpy_ms; the same as GB/s of `dense_bytes`; and memcpy's time
/// over each kernel's (compress_vs_memcpy, decompress_vs_memcpy: 1 is as fast as memcpy).
inline nlohmann::json kernel_throughput_json(double dense_bytes, double compress_ms,
                                             double decompress_ms, double memcpy_ms) {
  const auto gbps = [dense_bytes](double ms) { return dense_bytes / (ms * 1e6); };
  return {{"compress_ms", compress_ms},
          {"decompress_ms", decompress_ms},
          {"memcpy_ms", memcpy_ms},
          {"compress_gbps", gbps(compress_ms)},
          {"decompress_gbps", gbps(decompress_ms)},
          {"memcpy_gbps", gbps(memcpy_ms)},
          {"compress_vs_memcpy", memcpy_ms / compress_ms},
          {"decompress_vs_memcpy", memcpy_ms / decompress_ms}};
}

}  // namespace engram::bench
