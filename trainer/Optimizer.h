#pragma once
/// \file
/// The optimizer a training step updates the parameters with (trainer/Stepper.h steps it, and
/// nothing else does): Adam (trainer/FusedAdam.h, the default) or SGD with momentum
/// (trainer/FusedSgd.h), each with torch::optim's arithmetic in one fused loop per parameter.
///
/// \code
///   auto opt = engram::trainer::make_optimizer({"sgd", /*learning_rate=*/0.1, /*momentum=*/0.9},
///                                              model->parameters());
///   opt->zero_grad();
///   loss.backward();
///   opt->step();
///   checkpoint.tensors = opt->state_tensors();     // "sgd.0.momentum", ...
/// \endcode

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace engram::trainer {

/// load_state_tensors() found no tensor of a name it needs: the state is incomplete.
class MissingState : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The parameters and the loops over them; each optimizer supplies one parameter's update.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Resets every gradient to undefined (backward then hands its gradient tensors over).
  void zero_grad();
  /// One update of every parameter that has a gradient.
  void step();
  /// One update of the parameters with these indices (the constructor's order) that have a
  /// gradient: out-of-order backprop updates some later than the others (trainer/DataParallel.h).
  /// Each parameter's update is the one step() would make. Throws std::out_of_range for an index
  /// past the parameters.
  void step(const std::vector<std::size_t>& which);
  /// Its state as named tensors (the live tensors, not copies), what a training checkpoint saves
  /// (trainer/TrainingState.h): "adam.K.exp_avg", "adam.K.exp_avg_sq", "adam.steps"; or
  /// "sgd.K.momentum".
  virtual std::vector<std::pair<std::string, at::Tensor>> state_tensors() const = 0;
  /// Copies the state in from a checkpoint's tensors (other names are ignored). Throws
  /// MissingState naming a tensor it needs that is not there, std::invalid_argument naming one
  /// of another shape or type; either way nothing changes.
  virtual void load_state_tensors(const std::map<std::string, at::Tensor>& tensors) = 0;

 protected:
  /// Throws std::invalid_argument, naming the optimizer (`name`), for a parameter that is not a
  /// contiguous float32 CPU tensor.
  Optimizer(std::vector<at::Tensor> params, const char* name);
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  /// Parameter k's update from its gradient, which is defined; called without autograd.
  virtual void update(std::size_t k) = 0;

  std::vector<at::Tensor> params_;
  const char* name_;
};

/// Which optimizer and its settings.
struct OptimizerOptions {
  std::string name = "adam";    ///< "adam" or "sgd"
  double learning_rate = 1e-3;  ///< positive
  double momentum = 0.9;        ///< SGD only, in [0, 1): 0 is plain SGD
};

/// The names make_optimizer() knows: trainer::optimizer_names() (trainer/TrainingOptions.h).
/// The optimizer `options` names over `params` (contiguous float32 CPU tensors). Throws
/// std::invalid_argument for another name or a parameter of another kind.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          std::vector<at::Tensor> params);

}  // namespace engram::trainer
