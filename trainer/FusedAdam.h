#pragma once
/// \file
/// Adam (Kingma & Ba 2015) with the arithmetic of torch::optim::Adam (no weight decay, no AMSGrad),
/// on the CPU one fused loop per parameter over raw float buffers instead of about eight tensor
/// operations, on a device (CUDA) at::_fused_adam_ over every parameter with a gradient at once
/// (Optimizer::Kernel); gradients reset to undefined rather than zeroed, so that backward hands its
/// gradient tensors over instead of adding them into zeros.
///
/// \code
///   engram::trainer::FusedAdam adam(model->parameters(), /*learning_rate=*/1e-3);
///   adam.zero_grad();
///   loss.backward();
///   adam.step();
///   // The device path on CPU parameters (the tests compare it with the loop):
///   engram::trainer::FusedAdam fused(params, 1e-3, 0.9, 0.999, 1e-8, FusedAdam::Kernel::fused);
/// \endcode
///
/// Per element, as torch::optim::Adam computes it (all in float; k counts this parameter's steps):
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
///   p -= lr / (1 - beta1^k) * m / (sqrt(v) / sqrt(1 - beta2^k) + eps)
/// Parameters without a gradient are skipped (their step count does not advance). Float32
/// contiguous parameters on one device. The fused kernel reads each parameter's step count from a
/// float tensor on the device, as torch.optim.Adam(fused=True) does: exact to 2^24 steps.

#include "trainer/Optimizer.h"

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engram::trainer {

class FusedAdam : public Optimizer {
 public:
  /// Throws std::invalid_argument for a parameter that is not a contiguous float32 tensor,
  /// parameters on several devices, or Kernel::loop for parameters not on the CPU.
  FusedAdam(std::vector<torch::Tensor> params, double learning_rate, double beta1 = 0.9,
            double beta2 = 0.999, double eps = 1e-8, Kernel kernel = Kernel::automatic);

  /// "adam.K.exp_avg", "adam.K.exp_avg_sq" per parameter, and "adam.steps" (int64, one count
  /// per parameter).
  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const override;
  void load_state_tensors(const std::map<std::string, at::Tensor>& tensors) override;

  /// One parameter's moments (on the parameters' device) and how many updates it has had.
  struct State {
    torch::Tensor exp_avg, exp_avg_sq;
    int64_t steps = 0;
  };
  /// Each parameter's state, in the parameters' order (the live tensors, not copies): what a
  /// training checkpoint saves (trainer/TrainingState.h).
  const std::vector<State>& state() const { return state_; }
  /// Copies `state` in. Throws std::invalid_argument when the number of parameters or a shape
  /// differs, changing nothing.
  void load_state(const std::vector<State>& state);

 private:
  void update(std::size_t k) override;
  void update_fused(const std::vector<std::size_t>& ks) override;

  std::vector<State> state_;
  /// The fused kernel only: each state_[k].steps again, as a float scalar on the parameters'
  /// device (at::_fused_adam_ reads its step counts there), advanced with it, set from it on load.
  std::vector<torch::Tensor> device_steps_;
  double learning_rate_, beta1_, beta2_, eps_;
};

}  // namespace engram::trainer
