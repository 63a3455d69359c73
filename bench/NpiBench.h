#pragma once
/// \file
/// `engram bench npi`: NPI training throughput in C++ beside a faithful Python PyTorch peer
/// (bench/peers/npi_peer.py) run in the same invocation, at batch 1 and batch 32; and the C++
/// model on the layers of nn/ beside the same model on plain torch modules (`--layers torch`).

#include "common/PythonEnv.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace engram::npi {
struct NpiConfig;
}

namespace engram::bench {

struct NpiBenchOptions {
  std::string json_path;  ///< where the JSON goes (written atomically)
  std::string task = "addition";
  long steps = 20;                      ///< timed optimizer steps per batch size (after warm-up)
  std::vector<int> batch_sizes{1, 32};  ///< traces per step, one measurement each
  int threads = 1;                      ///< intra-op threads for both implementations
  /// Where both implementations and the peer train (trainer/Device.h). On CUDA the matrix-product
  /// floor, a CPU figure, is left out (null), and the times are wall times of steps that end
  /// reading their loss back (a synchronisation).
  std::string device = "cpu";
  int hidden = 256;
  std::uint64_t seed = 1;
  std::string python = torch_python();  ///< with the pinned torch (common/PythonEnv.h)
  bool skip_peer = false;
};

/// Floating-point operations of the matrix products of one NPI training step, forward and
/// backward, on a packed batch of `rows` steps in `sequences` invocations: what any
/// implementation of the model computes, whatever its language. Each invocation's first row has
/// no recurrent product (zero state); the one-hot features need no gradient. The bench divides it
/// by the rate torch::mm reaches on the step's largest product to get a floor no implementation
/// goes below, and reports each implementation's CPU time per step over that floor.
double npi_step_matmul_flops(const npi::NpiConfig& config, double rows, double sequences);

/// Measures, prints a table on `out` and writes the JSON; throws on failure (UsageError for bad
/// options).
void run_npi_bench(const NpiBenchOptions& options, std::ostream& out);

}  // namespace engram::bench
