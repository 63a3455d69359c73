#include "nn/BatchNorm2d.h"

#include "nn/Recompute.h"
#include "nn/detail/FunctionSupport.h"

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;

struct BatchNorm2dFunction : public torch::autograd::Function<BatchNorm2dFunction> {
  // `params` is {} or {weight, bias}: undefined tensors cannot be autograd inputs. The running
  // statistics are buffers, not inputs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params,
                            const c10::optional<at::Tensor>& running_mean,
                            const c10::optional<at::Tensor>& running_var, bool training,
                            double momentum, double eps) {
    const at::Tensor weight = params.empty() ? at::Tensor() : params[0];
    const at::Tensor bias = params.empty() ? at::Tensor() : params[1];
    TORCH_CHECK(x.dim() == 4, "nn::batch_norm2d: input [N, C, H, W] expected, got ", x.sizes());
    detail::capture_runtime(ctx);
    auto [y, save_mean, save_invstd] =
        at::native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
    detail::save(ctx, "x", x, SavedKind::activation);
    if (weight.defined()) detail::save(ctx, "weight", weight, SavedKind::parameter);
    if (bias.defined()) detail::save(ctx, "bias", bias, SavedKind::parameter);
    if (training) {
      detail::save(ctx, "mean", save_mean, SavedKind::other);
      detail::save(ctx, "invstd", save_invstd, SavedKind::other);
    } else {
      // Evaluation normalizes with the running statistics, which training may later update in
      // place: keep a copy.
      detail::save(ctx, "mean", running_mean->clone(), SavedKind::other);
      detail::save(ctx, "invstd", running_var->clone(), SavedKind::other);
    }
    ctx->saved_data["training"] = training;
    ctx->saved_data["eps"] = eps;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = detail::load(ctx, "x");
    const at::Tensor weight =
        ctx->saved_data.count("weight") ? detail::load(ctx, "weight") : at::Tensor();
    const at::Tensor bias =
        ctx->saved_data.count("bias") ? detail::load(ctx, "bias") : at::Tensor();
    const at::Tensor mean = detail::load(ctx, "mean");
    const at::Tensor stat = detail::load(ctx, "invstd");
    const bool training = ctx->saved_data["training"].toBool();
    const double eps = ctx->saved_data["eps"].toDouble();
    const bool dw = weight.defined() && weight.requires_grad();
    const bool db = bias.defined() && bias.requires_grad();
    // One call for all three: the weight and bias gradients are the reductions the input
    // gradient needs anyway. In training the statistics are the batch's (save_mean,
    // save_invstd); in evaluation the running ones.
    auto grads =
        training ? at::native_batch_norm_backward(grad_outputs[0], x, weight, {}, {}, mean, stat,
                                                  true, eps, {ctx->needs_input_grad(0), dw, db})
                 : at::native_batch_norm_backward(grad_outputs[0], x, weight, mean, stat, {}, {},
                                                  false, eps, {ctx->needs_input_grad(0), dw, db});
    at::Tensor dweight = std::get<1>(grads), dbias = std::get<2>(grads);
    detail::submit_weight_grad(
        ctx, WeightGradTask{"batch_norm2d", {weight, bias}, [weight, bias, dweight, dbias, dw, db] {
                              if (dw) detail::accumulate_grad(weight, dweight);
                              if (db) detail::accumulate_grad(bias, dbias);
                            }});
    variable_list result(1 + (weight.defined() ? 2 : 0) + 5);
    result[0] = std::get<0>(grads);
    return result;
  }
};

}  // namespace

at::Tensor batch_norm2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& running_mean, const at::Tensor& running_var,
                        bool training, double momentum, double eps) {
  TORCH_CHECK(training || (running_mean.defined() && running_var.defined()),
              "nn::batch_norm2d: evaluation needs running statistics");
  TORCH_CHECK(weight.defined() == bias.defined(),
              "nn::batch_norm2d: weight and bias are both defined or both undefined");
  const auto stat = [](const at::Tensor& t) {
    return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt;
  };
  const std::vector<at::Tensor> params =
      weight.defined() ? std::vector<at::Tensor>{weight, bias} : std::vector<at::Tensor>{};
  detail::SavingScope saving({x, weight, bias});
  return BatchNorm2dFunction::apply(x, at::TensorList(params), stat(running_mean),
                                    stat(running_var), training, momentum, eps);
}

BatchNorm2dImpl::BatchNorm2dImpl(BatchNorm2dOptions options_) : options(options_) { reset(); }

void BatchNorm2dImpl::reset() {
  TORCH_CHECK(options.num_features() > 0, "nn::BatchNorm2d: num_features must be positive");
  const int64_t c = options.num_features();
  if (options.affine()) {
    weight = register_parameter("weight", torch::ones({c}));
    bias = register_parameter("bias", torch::zeros({c}));
  } else {
    weight = register_parameter("weight", {}, false);
    bias = register_parameter("bias", {}, false);
  }
  running_mean = register_buffer("running_mean", torch::zeros({c}));
  running_var = register_buffer("running_var", torch::ones({c}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

at::Tensor BatchNorm2dImpl::forward(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.size(1) == options.num_features(), "nn::BatchNorm2d: input [N, ",
              options.num_features(), ", H, W] expected, got ", x.sizes());
  if (is_training() && is_recomputing()) {
    // The rerun of a recomputed unit (nn/Recompute.h): the batch statistics again, the running
    // ones left as the first run updated them.
    return batch_norm2d(x, weight, bias, {}, {}, true, options.momentum(), options.eps());
  }
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return batch_norm2d(x, weight, bias, running_mean, running_var, is_training(), options.momentum(),
                      options.eps());
}

}  // namespace engram::nn
