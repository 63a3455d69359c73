#pragma once
/// \file
/// The contract between a model and the training loop. Every model (NPI, primitives, TBCNN)
/// implements Workload; the Trainer knows models only through it, so the loop, the optimizer,
/// metrics and (in later issues) data-parallel reducers are shared.
///
/// \code
///   class MyWorkload : public engram::trainer::Workload { ... };
///   MyWorkload w(...);
///   engram::trainer::TrainerOptions opt;  opt.steps = 1000;
///   auto summary = engram::trainer::train(w, opt);
/// \endcode

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace engram::nn {
class UnitRunner;
}  // namespace engram::nn

namespace engram::trainer {

/// What one forward pass over a batch produced.
struct StepOutput {
  at::Tensor loss;                        ///< scalar, differentiable
  std::map<std::string, double> metrics;  ///< e.g. per-head losses, accuracies (no grad)
};

class Workload {
 public:
  virtual ~Workload() = default;
  /// Trainable parameters, in a stable order.
  virtual std::vector<at::Tensor> parameters() = 0;
  /// Number of examples the trainer samples batches from.
  virtual std::size_t num_examples() const = 0;
  /// Forward pass and loss over the examples with these indices.
  virtual StepOutput forward(const std::vector<std::size_t>& batch) = 0;

  /// Swap and recompute (trainer/MemoryTechniques.h) act on a model cut into units (nn/Units.h):
  /// a workload that is names its units here, in forward order; empty: not cut into units.
  virtual std::vector<std::string> unit_names() const { return {}; }
  /// From now on forward() runs the units through `runner` (nullptr: as before). Only called
  /// when unit_names() is not empty; `runner` must outlive its use.
  virtual void set_unit_runner(nn::UnitRunner* runner) { (void)runner; }
};

}  // namespace engram::trainer
