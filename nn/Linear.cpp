#include "nn/Linear.h"

#include "nn/detail/FunctionSupport.h"

#include <torch/nn/init.h>

#include <cmath>

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;

struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  // `params` is {weight} or {weight, bias}: undefined tensors cannot be autograd inputs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params) {
    const at::Tensor& weight = params[0];
    const at::Tensor bias = params.size() > 1 ? params[1] : at::Tensor();
    TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1),
                "nn::linear: input rows of width ", weight.size(1), " expected, got shape ",
                x.sizes());
    detail::capture_runtime(ctx);
    detail::save(ctx, "x", x, SavedKind::activation);
    detail::save(ctx, "weight", weight, SavedKind::parameter);
    if (bias.defined()) detail::save(ctx, "bias", bias, SavedKind::parameter);
    const at::Tensor x2 = x.reshape({-1, weight.size(1)});
    const at::Tensor y = bias.defined() ? at::addmm(bias, x2, weight.t()) : x2.mm(weight.t());
    if (x.dim() == 2) return y;
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    // Not a view: a view made inside a Function could not be modified in place afterwards
    // (an in-place ReLU on a linear layer's output).
    return at::_unsafe_view(y, shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = detail::load(ctx, "x");
    const at::Tensor weight = detail::load(ctx, "weight");
    const bool has_bias = ctx->saved_data.count("bias") > 0;
    const at::Tensor bias = has_bias ? detail::load(ctx, "bias") : at::Tensor();
    const at::Tensor g2 = grad_outputs[0].reshape({-1, weight.size(0)});
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = g2.mm(weight).view(x.sizes());
    detail::submit_weight_grad(
        ctx, WeightGradTask{"linear", {weight, bias}, [x, weight, bias, g2] {
                              const at::Tensor x2 = x.reshape({-1, weight.size(1)});
                              if (weight.requires_grad()) {
                                detail::accumulate_grad(weight, g2.t().mm(x2));
                              }
                              if (bias.defined() && bias.requires_grad()) {
                                detail::accumulate_grad(bias, g2.sum(0));
                              }
                            }});
    variable_list grads(1 + (has_bias ? 2 : 1));
    grads[0] = dx;
    return grads;
  }
};

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(weight.defined(), "nn::linear: undefined weight");
  detail::gate_parameters({weight, bias});
  detail::SavingScope saving({x, weight, bias});
  if (bias.defined()) return LinearFunction::apply(x, at::TensorList({weight, bias}));
  return LinearFunction::apply(x, at::TensorList(weight));
}

LinearImpl::LinearImpl(LinearOptions options_) : options(options_) { reset(); }

void LinearImpl::reset() {
  TORCH_CHECK(options.in_features() > 0 && options.out_features() > 0,
              "nn::Linear: sizes must be positive");
  weight =
      register_parameter("weight", torch::empty({options.out_features(), options.in_features()}));
  if (options.bias()) {
    bias = register_parameter("bias", torch::empty({options.out_features()}));
  } else {
    bias = register_parameter("bias", {}, /*requires_grad=*/false);
  }
  // As torch::nn::Linear, so the same seed draws the same weights.
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
    bias.uniform_(-bound, bound);
  }
}

at::Tensor LinearImpl::forward(const at::Tensor& x) { return nn::linear(x, weight, bias); }

}  // namespace engram::nn
