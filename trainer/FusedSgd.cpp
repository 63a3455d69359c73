#include "trainer/FusedSgd.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace engram::trainer {
namespace {

// The constants are rounded to float, as torch's CPU kernels round their scalar arguments for
// float tensors.
void sgd_momentum_update(int64_t n, float* __restrict param, const float* __restrict grad,
                         float* __restrict buffer, float momentum, float learning_rate) {
  for (int64_t i = 0; i < n; ++i) {
    const float b = buffer[i] * momentum + grad[i];
    buffer[i] = b;
    param[i] += -learning_rate * b;
  }
}

void sgd_update(int64_t n, float* __restrict param, const float* __restrict grad,
                float learning_rate) {
  for (int64_t i = 0; i < n; ++i) param[i] += -learning_rate * grad[i];
}

}  // namespace

FusedSgd::FusedSgd(std::vector<at::Tensor> params, double learning_rate, double momentum,
                   Kernel kernel)
    : Optimizer(std::move(params), "FusedSgd", kernel),
      learning_rate_(learning_rate),
      momentum_factor_(momentum) {
  if (!(momentum >= 0 && momentum < 1))
    throw std::invalid_argument("FusedSgd: momentum must be in [0, 1)");
  if (momentum_factor_ > 0)
    for (const auto& p : this->params()) momentum_.push_back(at::zeros_like(p));
}

void FusedSgd::update(std::size_t k) {
  const at::Tensor& p = params()[k];
  const at::Tensor grad = p.grad().contiguous();
  if (momentum_factor_ > 0) {
    sgd_momentum_update(p.numel(), p.data_ptr<float>(), grad.data_ptr<float>(),
                        momentum_[k].data_ptr<float>(), static_cast<float>(momentum_factor_),
                        static_cast<float>(learning_rate_));
  } else {
    sgd_update(p.numel(), p.data_ptr<float>(), grad.data_ptr<float>(),
               static_cast<float>(learning_rate_));
  }
}

// One at::_fused_sgd_ over the parameters: b = momentum b + g, p -= lr b (or p -= lr g without
// momentum). is_first_step is false: the buffers start at zero, and momentum * 0 + g is the copy
// of g that torch's first step makes, as in the loop.
void FusedSgd::update_fused(const std::vector<std::size_t>& ks) {
  std::vector<at::Tensor> ps, grads, buffers;
  ps.reserve(ks.size());
  grads.reserve(ks.size());
  for (std::size_t k : ks) {
    const at::Tensor& p = params()[k];
    ps.push_back(p);
    // The kernels want each gradient laid out as its parameter (contiguous).
    grads.push_back(p.grad().contiguous());
    if (momentum_factor_ > 0) buffers.push_back(momentum_[k]);
  }
  at::_fused_sgd_(ps, grads, buffers, /*weight_decay=*/0, momentum_factor_, learning_rate_,
                  /*dampening=*/0, /*nesterov=*/false, /*maximize=*/false,
                  /*is_first_step=*/false);
}

std::vector<std::pair<std::string, at::Tensor>> FusedSgd::state_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (std::size_t k = 0; k < momentum_.size(); ++k)
    named.emplace_back("sgd." + std::to_string(k) + ".momentum", momentum_[k]);
  return named;
}

void FusedSgd::load_state_tensors(const std::map<std::string, at::Tensor>& tensors) {
  for (std::size_t k = 0; k < momentum_.size(); ++k) {
    const std::string name = "sgd." + std::to_string(k) + ".momentum";
    const auto it = tensors.find(name);
    if (it == tensors.end()) throw MissingState("it has no " + name);
    if (it->second.sizes() != momentum_[k].sizes() || it->second.scalar_type() != at::kFloat)
      throw std::invalid_argument(name + " does not match its parameter's shape");
  }
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < momentum_.size(); ++k)
    momentum_[k].copy_(tensors.at("sgd." + std::to_string(k) + ".momentum"));
}

}  // namespace engram::trainer
