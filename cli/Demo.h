#pragma once
/// \file
/// `engram demo`: the whole NPI workflow on addition in a few minutes on two cores.

#include <ostream>
#include <string>

namespace engram::cli {

struct DemoOptions {
  std::string dir = "engram-demo";  ///< where the data, model and reports go
  int threads = 1;  ///< 0: all cores; one is fastest for these small matrices (see npi/Npi.h)
  std::string device = "cpu";  ///< where the model trains and runs (trainer/Device.h)
  /// Continue the training an interrupt stopped, from its state in `dir` (addition.pt.ckpt).
  bool resume = false;
};

/// Returns the exit code.
int run_demo(const DemoOptions& options, std::ostream& out);

}  // namespace engram::cli
