#pragma once
/// \file
/// `engram bench streams`: out-of-order backprop on one GPU (`--ooo-streams 2`, the weight
/// gradients on a second CUDA stream, nn/StreamScheduler.h) against one stream, on a ResNet at a
/// batch a GPU user trains with, side by side in one process: rounds of one-stream and
/// two-stream sessions on the same network, each step timed to the end of its kernels (the
/// device synchronised), the medians compared. Beside the measurement, the one-GPU step model's
/// prediction (parallel/OooPlan.h's predict_two_stream_backward on the backward's stretches,
/// trainer/BackwardProfile.h): the one-stream step less what the model says a second stream
/// hides, and the share of that the measurement realised.
///
/// Needs a CUDA device (a usage error otherwise, before any work).

#include <cstdint>
#include <ostream>
#include <string>

namespace engram::bench {

struct StreamsBenchOptions {
  std::string json_path;            ///< where the JSON goes (written atomically)
  std::string workload = "resnet";  ///< "resnet" (CIFAR ResNet-18) or "resnet50" (224x224)
  long batch = 0;                   ///< 0: 256 (resnet) or 64 (resnet50)
  long warmup = 3;                  ///< untimed steps per session
  long steps = 10;                  ///< timed steps per session
  int rounds = 2;                   ///< one-stream and two-stream sessions, alternating
  std::string device = "cuda";
  std::uint64_t seed = 1;
};

/// Measures, prints a summary on `out` and writes the JSON; UsageError for bad options or no GPU.
void run_streams_bench(const StreamsBenchOptions& options, std::ostream& out);

}  // namespace engram::bench
