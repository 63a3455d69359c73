#pragma once
/// \file
/// The training loop shared by every model: batch sampling, Adam (trainer/FusedAdam.h), gradient
/// clipping, JSON-lines metrics and a progress bar.
///
/// \code
///   engram::trainer::TrainerOptions opt;
///   opt.steps = 2000;  opt.batch_size = 32;  opt.metrics_path = "metrics.jsonl";
///   engram::trainer::TrainSummary s = engram::trainer::train(workload, opt);
/// \endcode

#include "trainer/Workload.h"

#include <cstdint>
#include <functional>
#include <string>

namespace engram::trainer {

struct TrainerOptions {
  long steps = 1000;            ///< optimizer steps
  int batch_size = 32;          ///< examples per step, sampled without replacement per epoch
  double learning_rate = 1e-3;  ///< Adam
  double grad_clip = 1.0;       ///< max global gradient norm; <= 0 disables clipping
  std::uint64_t seed = 1;       ///< batch order
  std::string metrics_path;     ///< JSON lines, one object per logged step; empty: none
  int log_every = 10;           ///< steps between metrics lines
  bool progress = false;        ///< draw a progress bar on stderr
  /// Called every `log_every` steps with the step number and the averaged metrics, before the
  /// metrics line is written: entries it adds (e.g. a validation score) go into that line.
  /// Returning true stops training early (e.g. once the training set is solved). Time spent in it
  /// is not counted in TrainSummary::seconds.
  std::function<bool(long step, std::map<std::string, double>& metrics)> on_log;
};

struct TrainSummary {
  long steps = 0;
  double final_loss = 0;
  double seconds = 0;
  double examples_per_second = 0;
};

/// One step's forward and backward pass over `batch`, with the memory phases and spans set
/// (memory/MemoryTracker.h), then the gradient scheduler's finish() (nn/GradScheduler.h), so every
/// weight gradient is in .grad when it returns. The optimizer step is the caller's.
StepOutput run_step_forward_backward(Workload& workload, const std::vector<std::size_t>& batch);

/// Runs the loop; throws std::runtime_error if the loss becomes non-finite.
TrainSummary train(Workload& workload, const TrainerOptions& options);

}  // namespace engram::trainer
