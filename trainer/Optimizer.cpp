#include "trainer/Optimizer.h"

#include "trainer/FusedAdam.h"
#include "trainer/FusedSgd.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace engram::trainer {

Optimizer::Optimizer(std::vector<at::Tensor> params, const char* name)
    : params_(std::move(params)), name_(name) {
  for (const auto& p : params_)
    if (p.scalar_type() != at::kFloat || !p.device().is_cpu() || !p.is_contiguous())
      throw std::invalid_argument(std::string(name_) +
                                  ": parameters must be contiguous float32 CPU tensors");
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

void Optimizer::step() {
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < params_.size(); ++k)
    if (params_[k].grad().defined()) update(k);
}

void Optimizer::step(const std::vector<std::size_t>& which) {
  at::NoGradGuard no_grad;
  for (std::size_t k : which) {
    if (k >= params_.size())
      throw std::out_of_range(std::string(name_) + "::step: no parameter " + std::to_string(k));
    if (params_[k].grad().defined()) update(k);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          std::vector<at::Tensor> params) {
  if (options.name == "adam")
    return std::make_unique<FusedAdam>(std::move(params), options.learning_rate);
  if (options.name == "sgd")
    return std::make_unique<FusedSgd>(std::move(params), options.learning_rate, options.momentum);
  throw std::invalid_argument("unknown optimizer '" + options.name + "' (adam, sgd)");
}

}  // namespace engram::trainer
