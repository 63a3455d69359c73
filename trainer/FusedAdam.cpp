#include "trainer/FusedAdam.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace engram::trainer {
namespace {

// One parameter's update; the constants are rounded to float as torch's CPU kernels round their
// scalar arguments for float tensors.
void adam_update(int64_t n, float* __restrict param, const float* __restrict grad,
                 float* __restrict exp_avg, float* __restrict exp_avg_sq, float beta1,
                 float one_minus_beta1, float beta2, float one_minus_beta2, float sqrt_correction2,
                 float eps, float step_size) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float m = exp_avg[i] * beta1 + one_minus_beta1 * g;
    const float v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] += -step_size * m / (std::sqrt(v) / sqrt_correction2 + eps);
  }
}

}  // namespace

FusedAdam::FusedAdam(std::vector<torch::Tensor> params, double learning_rate, double beta1,
                     double beta2, double eps, Kernel kernel)
    : Optimizer(std::move(params), "FusedAdam", kernel),
      learning_rate_(learning_rate),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps) {
  for (const auto& p : this->params()) {
    state_.push_back({torch::zeros_like(p), torch::zeros_like(p), 0});
    if (this->kernel() == Kernel::fused)
      device_steps_.push_back(torch::zeros({}, p.options().dtype(torch::kFloat)));
  }
}

void FusedAdam::load_state(const std::vector<State>& state) {
  if (state.size() != state_.size()) {
    throw std::invalid_argument("optimizer state of " + std::to_string(state.size()) +
                                " parameters, the optimizer has " + std::to_string(state_.size()));
  }
  for (std::size_t k = 0; k < state.size(); ++k) {
    for (const auto* t : {&state[k].exp_avg, &state[k].exp_avg_sq}) {
      if (!t->defined() || t->sizes() != params()[k].sizes() || t->scalar_type() != torch::kFloat)
        throw std::invalid_argument("optimizer state of parameter " + std::to_string(k) +
                                    " does not match its shape");
    }
    if (state[k].steps < 0)
      throw std::invalid_argument("negative step count for parameter " + std::to_string(k));
  }
  torch::NoGradGuard no_grad;
  for (std::size_t k = 0; k < state.size(); ++k) {
    state_[k].exp_avg.copy_(state[k].exp_avg);
    state_[k].exp_avg_sq.copy_(state[k].exp_avg_sq);
    state_[k].steps = state[k].steps;
    if (!device_steps_.empty()) device_steps_[k].fill_(static_cast<double>(state[k].steps));
  }
}

std::vector<std::pair<std::string, at::Tensor>> FusedAdam::state_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> named;
  at::Tensor steps = at::empty({static_cast<int64_t>(state_.size())}, at::kLong);
  for (std::size_t k = 0; k < state_.size(); ++k) {
    const std::string i = std::to_string(k);
    named.emplace_back("adam." + i + ".exp_avg", state_[k].exp_avg);
    named.emplace_back("adam." + i + ".exp_avg_sq", state_[k].exp_avg_sq);
    steps[static_cast<int64_t>(k)] = state_[k].steps;
  }
  named.emplace_back("adam.steps", steps);
  return named;
}

void FusedAdam::load_state_tensors(const std::map<std::string, at::Tensor>& tensors) {
  const auto named = [&](const std::string& name) -> const at::Tensor& {
    const auto it = tensors.find(name);
    if (it == tensors.end()) throw MissingState("it has no " + name);
    return it->second;
  };
  const at::Tensor& steps = named("adam.steps");
  if (steps.scalar_type() != at::kLong || steps.dim() != 1)
    throw std::invalid_argument("adam.steps is not a vector of step counts");
  if (steps.numel() != static_cast<int64_t>(state_.size()))
    throw std::invalid_argument("Adam's state of " + std::to_string(steps.numel()) +
                                " parameters, the optimizer has " + std::to_string(state_.size()));
  const at::Tensor counts = steps.contiguous();
  std::vector<State> state;
  for (std::size_t k = 0; k < state_.size(); ++k) {
    const std::string i = std::to_string(k);
    state.push_back({named("adam." + i + ".exp_avg"), named("adam." + i + ".exp_avg_sq"),
                     counts.data_ptr<int64_t>()[k]});
  }
  load_state(state);
}

void FusedAdam::update(std::size_t k) {
  const at::Tensor& p = params()[k];
  State& s = state_[k];
  ++s.steps;
  const double correction1 = 1 - std::pow(beta1_, static_cast<double>(s.steps));
  const double correction2 = 1 - std::pow(beta2_, static_cast<double>(s.steps));
  const torch::Tensor grad = p.grad().contiguous();
  adam_update(p.numel(), p.data_ptr<float>(), grad.data_ptr<float>(), s.exp_avg.data_ptr<float>(),
              s.exp_avg_sq.data_ptr<float>(), static_cast<float>(beta1_),
              static_cast<float>(1 - beta1_), static_cast<float>(beta2_),
              static_cast<float>(1 - beta2_), static_cast<float>(std::sqrt(correction2)),
              static_cast<float>(eps_), static_cast<float>(learning_rate_ / correction1));
}

// As torch/optim/adam.py's _fused_adam: the step counts advance on the device first (one
// multi-tensor add), then one at::_fused_adam_ over all of them: per element the update above,
// with the bias corrections from each parameter's own count.
void FusedAdam::update_fused(const std::vector<std::size_t>& ks) {
  std::vector<torch::Tensor> ps, grads, exp_avgs, exp_avg_sqs, steps;
  for (auto* list : {&ps, &grads, &exp_avgs, &exp_avg_sqs, &steps}) list->reserve(ks.size());
  for (std::size_t k : ks) {
    const at::Tensor& p = params()[k];
    ps.push_back(p);
    // The kernels want each gradient laid out as its parameter (contiguous).
    grads.push_back(p.grad().contiguous());
    exp_avgs.push_back(state_[k].exp_avg);
    exp_avg_sqs.push_back(state_[k].exp_avg_sq);
    steps.push_back(device_steps_[k]);
  }
  at::_foreach_add_(steps, 1);
  at::_fused_adam_(ps, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/at::TensorList(), steps,
                   learning_rate_, beta1_, beta2_, /*weight_decay=*/0, eps_,
                   /*amsgrad=*/false, /*maximize=*/false);
  for (std::size_t k : ks) ++state_[k].steps;
}

}  // namespace engram::trainer
