#pragma once
/// \file
/// SGD with momentum with the arithmetic of torch::optim::SGD (no dampening, no Nesterov, no
/// weight decay): on the CPU one fused loop per parameter over raw float buffers, on a device
/// (CUDA) at::_fused_sgd_ over every parameter with a gradient at once (Optimizer::Kernel). Per
/// element, in float:
///   b = momentum b + g;  p -= lr b        (momentum 0: p -= lr g, and no buffer is kept)
/// torch starts the buffer as a copy of the first gradient; starting it at zero gives the same
/// first buffer bit for bit (momentum * 0 + g == g), so no step count is kept (the fused kernel is
/// called with is_first_step false, on the zero buffers, for the same reason). Parameters without
/// a gradient are skipped. Float32 contiguous parameters on one device.
///
/// \code
///   engram::trainer::FusedSgd sgd(model->parameters(), /*learning_rate=*/0.1, /*momentum=*/0.9);
///   sgd.zero_grad();
///   loss.backward();
///   sgd.step();
///   // The device path on CPU parameters (the tests compare it with the loop):
///   engram::trainer::FusedSgd fused(params, 0.1, 0.9, FusedSgd::Kernel::fused);
/// \endcode

#include "trainer/Optimizer.h"

namespace engram::trainer {

class FusedSgd : public Optimizer {
 public:
  /// Throws std::invalid_argument for a parameter that is not a contiguous float32 tensor,
  /// parameters on several devices, Kernel::loop for parameters not on the CPU, or a momentum
  /// outside [0, 1).
  FusedSgd(std::vector<at::Tensor> params, double learning_rate, double momentum = 0,
           Kernel kernel = Kernel::automatic);

  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const override;
  void load_state_tensors(const std::map<std::string, at::Tensor>& tensors) override;

 private:
  void update(std::size_t k) override;
  void update_fused(const std::vector<std::size_t>& ks) override;

  std::vector<at::Tensor> momentum_;  ///< one buffer per parameter; none when momentum is 0
  double learning_rate_, momentum_factor_;
};

}  // namespace engram::trainer
