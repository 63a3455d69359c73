#include "nn/Conv2d.h"

#include "nn/detail/FunctionSupport.h"

#include <torch/nn/init.h>

#include <cmath>

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;

struct Conv2dFunction : public torch::autograd::Function<Conv2dFunction> {
  // `params` is {weight} or {weight, bias}: undefined tensors cannot be autograd inputs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params,
                            int64_t stride, int64_t padding) {
    const at::Tensor& weight = params[0];
    const at::Tensor bias = params.size() > 1 ? params[1] : at::Tensor();
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && x.size(1) == weight.size(1),
                "nn::conv2d: input [N, ", weight.size(1), ", H, W] expected, got ", x.sizes());
    detail::capture_runtime(ctx);
    detail::save(ctx, "x", x, SavedKind::activation);
    detail::save(ctx, "weight", weight, SavedKind::parameter);
    if (bias.defined()) detail::save(ctx, "bias", bias, SavedKind::parameter);
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    return at::convolution(x, weight, bias, {stride, stride}, {padding, padding}, {1, 1},
                           /*transposed=*/false, {0, 0}, /*groups=*/1);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = detail::load(ctx, "x");
    const at::Tensor weight = detail::load(ctx, "weight");
    const bool has_bias = ctx->saved_data.count("bias") > 0;
    const at::Tensor bias = has_bias ? detail::load(ctx, "bias") : at::Tensor();
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const int64_t padding = ctx->saved_data["padding"].toInt();
    const at::Tensor g = grad_outputs[0].contiguous();
    detail::submit_weight_grad(
        ctx,
        WeightGradTask{"conv2d", {weight, bias}, [x, weight, bias, g, stride, padding] {
                         const bool dw = weight.requires_grad();
                         const bool db = bias.defined() && bias.requires_grad();
                         std::vector<int64_t> bias_sizes{weight.size(0)};
                         auto grads = at::convolution_backward(
                             g, x, weight,
                             db ? c10::OptionalIntArrayRef(bias_sizes) : c10::OptionalIntArrayRef(),
                             {stride, stride}, {padding, padding}, {1, 1}, false, {0, 0}, 1,
                             {false, dw, db});
                         if (dw) detail::accumulate_grad(weight, std::get<1>(grads));
                         if (db) detail::accumulate_grad(bias, std::get<2>(grads));
                       }});
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      dx = std::get<0>(at::convolution_backward(g, x, weight, c10::nullopt, {stride, stride},
                                                {padding, padding}, {1, 1}, false, {0, 0}, 1,
                                                {true, false, false}));
    }
    variable_list grads(1 + (has_bias ? 2 : 1) + 2);
    grads[0] = dx;
    return grads;
  }
};

}  // namespace

at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  int64_t stride, int64_t padding) {
  TORCH_CHECK(weight.defined(), "nn::conv2d: undefined weight");
  detail::SavingScope saving({x, weight, bias});
  if (bias.defined()) {
    return Conv2dFunction::apply(x, at::TensorList({weight, bias}), stride, padding);
  }
  return Conv2dFunction::apply(x, at::TensorList(weight), stride, padding);
}

Conv2dImpl::Conv2dImpl(Conv2dOptions options_) : options(options_) { reset(); }

void Conv2dImpl::reset() {
  TORCH_CHECK(options.in_channels() > 0 && options.out_channels() > 0 &&
                  options.kernel_size() > 0 && options.stride() > 0 && options.padding() >= 0,
              "nn::Conv2d: sizes and stride must be positive, padding non-negative");
  const int64_t k = options.kernel_size();
  weight = register_parameter("weight",
                              torch::empty({options.out_channels(), options.in_channels(), k, k}));
  if (options.bias()) {
    bias = register_parameter("bias", torch::empty({options.out_channels()}));
  } else {
    bias = register_parameter("bias", {}, /*requires_grad=*/false);
  }
  // As torch::nn::Conv2d.
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_channels() * k * k));
    bias.uniform_(-bound, bound);
  }
}

at::Tensor Conv2dImpl::forward(const at::Tensor& x) {
  return nn::conv2d(x, weight, bias, options.stride(), options.padding());
}

}  // namespace engram::nn
