#pragma once
/// \file
/// `engram bench npi`: NPI training throughput in C++ beside a faithful Python PyTorch peer
/// (bench/peers/npi_peer.py) run in the same invocation, at batch 1 and batch 32; and the C++
/// model on the layers of nn/ beside the same model on plain torch modules (`--layers torch`).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace engram::bench {

struct NpiBenchOptions {
  std::string json_path;  ///< where the JSON goes (written atomically)
  std::string task = "addition";
  long steps = 20;                      ///< timed optimizer steps per batch size (after warm-up)
  std::vector<int> batch_sizes{1, 32};  ///< traces per step, one measurement each
  int threads = 1;                      ///< intra-op threads for both implementations
  int hidden = 256;
  std::uint64_t seed = 1;
  std::string python = "/usr/bin/python3";
  bool skip_peer = false;
};

/// Measures, prints a table on `out` and writes the JSON; throws on failure (UsageError for bad
/// options).
void run_npi_bench(const NpiBenchOptions& options, std::ostream& out);

}  // namespace engram::bench
