#pragma once
/// \file
/// SGD with momentum with the arithmetic of torch::optim::SGD (no dampening, no Nesterov, no
/// weight decay), one fused loop per parameter over raw float buffers. Per element, in float:
///   b = momentum b + g;  p -= lr b        (momentum 0: p -= lr g, and no buffer is kept)
/// torch starts the buffer as a copy of the first gradient; starting it at zero gives the same
/// first buffer bit for bit (momentum * 0 + g == g), so no step count is kept. Parameters without
/// a gradient are skipped. CPU float32 contiguous parameters only.
///
/// \code
///   engram::trainer::FusedSgd sgd(model->parameters(), /*learning_rate=*/0.1, /*momentum=*/0.9);
///   sgd.zero_grad();
///   loss.backward();
///   sgd.step();
/// \endcode

#include "trainer/Optimizer.h"

namespace engram::trainer {

class FusedSgd : public Optimizer {
 public:
  /// Throws std::invalid_argument for a parameter that is not a contiguous float32 CPU tensor,
  /// or a momentum outside [0, 1).
  FusedSgd(std::vector<at::Tensor> params, double learning_rate, double momentum = 0);

  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const override;
  void load_state_tensors(const std::map<std::string, at::Tensor>& tensors) override;

 private:
  void update(std::size_t k) override;

  std::vector<at::Tensor> momentum_;  ///< one buffer per parameter; none when momentum is 0
  double learning_rate_, momentum_factor_;
};

}  // namespace engram::trainer
