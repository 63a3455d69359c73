#include "trainer/Optimizer.h"

#include "trainer/FusedAdam.h"
#include "trainer/FusedSgd.h"

#include <stdexcept>

namespace engram::trainer {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          std::vector<at::Tensor> params) {
  if (options.name == "adam")
    return std::make_unique<FusedAdam>(std::move(params), options.learning_rate);
  if (options.name == "sgd")
    return std::make_unique<FusedSgd>(std::move(params), options.learning_rate, options.momentum);
  throw std::invalid_argument("unknown optimizer '" + options.name + "' (adam, sgd)");
}

}  // namespace engram::trainer
