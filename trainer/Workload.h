#pragma once
/// \file
/// The contract between a model and the training session: what a model must provide, and no
/// more. Every model (NPI, primitives, TBCNN, ResNet) implements Workload; the trainer knows
/// models only through it, so the session (trainer/Trainer.h), the step (trainer/Stepper.h), the
/// optimizer, the memory techniques, metrics and the data-parallel reducers are shared.
///
/// \code
///   class MyWorkload : public engram::trainer::Workload {
///     std::vector<at::Tensor> parameters() override { return model_->parameters(); }
///     std::size_t num_examples() const override { return data_.size(); }
///     engram::trainer::StepOutput forward(const engram::trainer::Batch& b) override {
///       return {loss_of(b.indices), {}};
///     }
///   };
///   MyWorkload w(...);
///   engram::trainer::TrainingOptions opt;  opt.steps = 1000;
///   auto summary = engram::trainer::train(w, opt);
/// \endcode

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/Algorithms.h"

namespace engram::nn {
class UnitRunner;
}  // namespace engram::nn

namespace engram::trainer {

/// The device the parameters are on: the first one's, or the CPU without any.
inline c10::Device parameters_device(const std::vector<at::Tensor>& parameters) {
  return parameters.empty() ? c10::Device(c10::kCPU) : parameters.front().device();
}

/// What one forward pass over a batch produced.
struct StepOutput {
  at::Tensor loss;                        ///< scalar, differentiable
  std::map<std::string, double> metrics;  ///< e.g. per-head losses, accuracies (no grad)
};

/// The examples of one step, made ready for forward. A workload that prepares its input before
/// forward (packing traces into tensors, say) derives from it and returns its own from
/// make_batch(); the step times that work as its own phase and releases the batch when forward
/// returns.
struct Batch {
  virtual ~Batch() = default;
  std::vector<std::size_t> indices;  ///< the sampled examples
  /// What each term of the loss is averaged over (Workload::loss_denominators). Empty: this
  /// batch's own counts. Data-parallel training sets the global batch's, so that each rank's
  /// loss is its share of the global mean and the ranks' summed gradients are the global
  /// batch's gradient.
  std::vector<double> loss_denominators;
  /// loss_denominators[term], or `local` (this batch's own count) when they are not set.
  double denominator(std::size_t term, double local) const {
    return loss_denominators.empty() ? local : loss_denominators.at(term);
  }
};

class Workload {
 public:
  virtual ~Workload() = default;
  /// Trainable parameters, in a stable order.
  virtual std::vector<at::Tensor> parameters() = 0;
  /// Moves the model's parameters and buffers to `device` (in place: the parameters stay the
  /// same tensors) and makes the batches of make_batch() there from then on. The training
  /// session calls it with its device (TrainingOptions::device) before it creates the optimizer;
  /// models are built on the CPU, so their initial weights do not depend on the device. The
  /// default refuses any device but the CPU (std::invalid_argument).
  virtual void to_device(const c10::Device& device);
  /// Number of examples the trainer samples batches from.
  virtual std::size_t num_examples() const = 0;
  /// The batch of the examples with these indices. The default keeps the indices only, and
  /// forward() makes its input itself.
  virtual std::unique_ptr<Batch> make_batch(std::vector<std::size_t> indices) {
    auto batch = std::make_unique<Batch>();
    batch->indices = std::move(indices);
    return batch;
  }
  /// Forward pass and loss over a batch from make_batch(). Each term of the loss is a sum over
  /// the batch divided by batch.denominator(term, this batch's count).
  virtual StepOutput forward(const Batch& batch) = 0;
  /// The counts the loss's terms average over, for the examples with these indices (of any
  /// rank: data-parallel training asks for the global batch's). The default: one term, the
  /// number of examples. Must agree with what forward() uses.
  virtual std::vector<double> loss_denominators(const std::vector<std::size_t>& indices) const {
    return {static_cast<double>(indices.size())};
  }
  /// Each example's length (its problem size), what a curriculum orders the examples by
  /// (TrainingOptions::curriculum). Empty: the examples have no such order.
  virtual std::vector<int> example_lengths() const { return {}; }
  /// What makes two steps' allocation sequences the same (fixed-structure memory reuse,
  /// memory/ArenaReuse.h): steps of equal signatures reuse one plan. The default, the number of
  /// examples, suits models whose shapes depend on nothing else; a wrong signature costs only
  /// misses, never a wrong result.
  virtual std::uint64_t step_signature(const std::vector<std::size_t>& indices) const {
    return indices.size();
  }

  /// Swap and recompute (trainer/MemoryTechniques.h) act on a model cut into units (nn/Units.h):
  /// a workload that is names its units here, in forward order; empty: not cut into units.
  virtual std::vector<std::string> unit_names() const { return {}; }
  /// From now on forward() runs the units through `runner` (nullptr: as before). Only called
  /// when unit_names() is not empty; `runner` must outlive its use.
  virtual void set_unit_runner(nn::UnitRunner* runner) { (void)runner; }
  /// Lower-memory algorithm replacement (technique "algo", trainer/MemoryTechniques.h): the
  /// layers whose algorithm can be replaced (nn/Algorithms.h), in a stable order, named as in
  /// the model; empty: none.
  virtual std::vector<nn::NamedAlgorithmLayer> algorithm_layers() { return {}; }
};

}  // namespace engram::trainer
