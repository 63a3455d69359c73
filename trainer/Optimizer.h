#pragma once
/// \file
/// The optimizer a training step updates the parameters with (trainer/Stepper.h steps it, and
/// nothing else does): Adam (trainer/FusedAdam.h, the default) or SGD with momentum
/// (trainer/FusedSgd.h), each with torch::optim's arithmetic: on the CPU in one fused loop per
/// parameter (Engram's own), on a device (CUDA) with PyTorch's fused multi-tensor kernels, one call
/// per step over every parameter that has a gradient (Optimizer::Kernel).
///
/// \code
///   auto opt = engram::trainer::make_optimizer({"sgd", /*learning_rate=*/0.1, /*momentum=*/0.9},
///                                              model->parameters());
///   opt->zero_grad();
///   loss.backward();
///   opt->step();
///   checkpoint.tensors = opt->state_tensors();     // "sgd.0.momentum", ...
///
///   model->to(torch::kCUDA);                        // the same on a device: the fused kernels
///   auto on_gpu = engram::trainer::make_optimizer({"adam", 1e-3}, model->parameters());
///   on_gpu->load_state_tensors(saved);              // a CPU run's state continues there
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

/// The parameters and the loops over them; each optimizer supplies one parameter's update (the
/// loop) and one update of several parameters at once (the fused kernels).
class Optimizer {
 public:
  /// How step() updates the parameters. Both give torch::optim's results to float rounding (not
  /// bit for bit: the kernels round some constants and products differently).
  enum class Kernel {
    automatic,  ///< `loop` for CPU parameters, `fused` for parameters on any other device
    loop,       ///< Engram's loop per parameter over raw float buffers: CPU parameters only
    /// PyTorch's fused multi-tensor kernels (at::_fused_adam_, at::_fused_sgd_): one call per
    /// step() over every parameter with a gradient, on any device; they have CPU kernels too,
    /// which is how the tests compare it with `loop` on a machine without a GPU.
    fused,
  };

  virtual ~Optimizer() = default;
  /// Resets every gradient to undefined (backward then hands its gradient tensors over).
  void zero_grad();
  /// One update of every parameter that has a gradient.
  void step();
  /// One update of the parameters with these indices (the constructor's order) that have a
  /// gradient: out-of-order backprop updates some later than the others (trainer/DataParallel.h).
  /// Each parameter's update is the one step() would make (the fused kernel: one call over these
  /// parameters; an index named twice is updated twice, as the loop does). Throws
  /// std::out_of_range for an index past the parameters, before updating any.
  void step(const std::vector<std::size_t>& which);
  /// The kernel the constructor chose: Kernel::loop or Kernel::fused, never automatic.
  Kernel kernel() const { return kernel_; }
  /// The device every parameter is on (the CPU when there are none).
  const at::Device& device() const { return device_; }
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
  /// contiguous float32 tensor, parameters on more than one device, or Kernel::loop for
  /// parameters that are not on the CPU.
  Optimizer(std::vector<at::Tensor> params, const char* name, Kernel kernel = Kernel::automatic);
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  /// Parameter k's update from its gradient, which is defined; called without autograd, by the
  /// loop kernel only.
  virtual void update(std::size_t k) = 0;
  /// The update of parameters `ks` (distinct, each with a defined gradient, at least one) in one
  /// fused call; called without autograd, by the fused kernel only.
  virtual void update_fused(const std::vector<std::size_t>& ks) = 0;

  std::vector<at::Tensor> params_;
  const char* name_;
  at::Device device_{at::kCPU};
  Kernel kernel_ = Kernel::loop;
};

/// Which optimizer and its settings.
struct OptimizerOptions {
  std::string name = "adam";    ///< "adam" or "sgd"
  double learning_rate = 1e-3;  ///< positive
  double momentum = 0.9;        ///< SGD only, in [0, 1): 0 is plain SGD
};

/// The names make_optimizer() knows: trainer::optimizer_names() (trainer/TrainingOptions.h).
/// The optimizer `options` names over `params` (contiguous float32 tensors on one device; the loop
/// kernel on the CPU, the fused kernels elsewhere). Throws std::invalid_argument for another name
/// or parameters of another kind.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          std::vector<at::Tensor> params);

}  // namespace engram::trainer
