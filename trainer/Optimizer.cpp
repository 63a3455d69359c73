#include "trainer/Optimizer.h"

#include "trainer/FusedAdam.h"
#include "trainer/FusedSgd.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace engram::trainer {

Optimizer::Optimizer(std::vector<at::Tensor> params, const char* name, Kernel kernel)
    : params_(std::move(params)), name_(name) {
  if (!params_.empty() && params_.front().defined()) device_ = params_.front().device();
  for (const auto& p : params_) {
    if (!p.defined() || p.scalar_type() != at::kFloat || !p.is_contiguous())
      throw std::invalid_argument(std::string(name_) +
                                  ": parameters must be contiguous float32 tensors");
    if (p.device() != device_)
      throw std::invalid_argument(std::string(name_) + ": parameters on " + device_.str() +
                                  " and on " + p.device().str() +
                                  "; they must all be on one device");
  }
  if (kernel == Kernel::automatic) kernel = device_.is_cpu() ? Kernel::loop : Kernel::fused;
  if (kernel == Kernel::loop && !device_.is_cpu())
    throw std::invalid_argument(std::string(name_) + ": the loop kernel updates CPU parameters " +
                                "only, these are on " + device_.str() + " (Kernel::fused)");
  kernel_ = kernel;
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

void Optimizer::step() {
  at::NoGradGuard no_grad;
  if (kernel_ == Kernel::loop) {
    for (std::size_t k = 0; k < params_.size(); ++k)
      if (params_[k].grad().defined()) update(k);
    return;
  }
  std::vector<std::size_t> ready;
  for (std::size_t k = 0; k < params_.size(); ++k)
    if (params_[k].grad().defined()) ready.push_back(k);
  if (!ready.empty()) update_fused(ready);
}

void Optimizer::step(const std::vector<std::size_t>& which) {
  for (std::size_t k : which)
    if (k >= params_.size())
      throw std::out_of_range(std::string(name_) + "::step: no parameter " + std::to_string(k));
  at::NoGradGuard no_grad;
  if (kernel_ == Kernel::loop) {
    for (std::size_t k : which)
      if (params_[k].grad().defined()) update(k);
    return;
  }
  // One fused call over the subset. A fused call must not name a parameter twice (its kernel
  // would update it from two threads at once), so a second mention starts the next call: the
  // parameter is updated twice, in the order the loop would.
  std::vector<std::size_t> batch;
  std::vector<bool> in_batch(params_.size(), false);
  for (std::size_t k : which) {
    if (!params_[k].grad().defined()) continue;
    if (in_batch[k]) {
      update_fused(batch);
      for (std::size_t j : batch) in_batch[j] = false;
      batch.clear();
    }
    batch.push_back(k);
    in_batch[k] = true;
  }
  if (!batch.empty()) update_fused(batch);
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
