#include "trainer/FusedSgd.h"

#include <ATen/ATen.h>

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

FusedSgd::FusedSgd(std::vector<at::Tensor> params, double learning_rate, double momentum)
    : params_(std::move(params)), learning_rate_(learning_rate), momentum_factor_(momentum) {
  if (!(momentum >= 0 && momentum < 1))
    throw std::invalid_argument("FusedSgd: momentum must be in [0, 1)");
  for (const auto& p : params_) {
    if (p.scalar_type() != at::kFloat || !p.device().is_cpu() || !p.is_contiguous())
      throw std::invalid_argument("FusedSgd: parameters must be contiguous float32 CPU tensors");
    if (momentum_factor_ > 0) momentum_.push_back(at::zeros_like(p));
  }
}

void FusedSgd::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

void FusedSgd::step() {
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < params_.size(); ++k) update(k);
}

void FusedSgd::step(const std::vector<std::size_t>& which) {
  at::NoGradGuard no_grad;
  for (std::size_t k : which) {
    if (k >= params_.size())
      throw std::out_of_range("FusedSgd::step: no parameter " + std::to_string(k));
    update(k);
  }
}

void FusedSgd::update(std::size_t k) {
  auto& p = params_[k];
  if (!p.grad().defined()) return;
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
