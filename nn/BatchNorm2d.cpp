#include "nn/BatchNorm2d.h"

#include "nn/Recompute.h"
#include "nn/detail/FunctionSupport.h"

#include <ATen/core/grad_mode.h>

#include <tuple>

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;

/// [1, C, 1, 1] for broadcasting a per-channel vector over [N, C, H, W].
at::Tensor per_channel(const at::Tensor& v) { return v.view({1, -1, 1, 1}); }

/// Synchronised batch statistics (data-parallel training with several replicas): the mean and
/// biased variance of the global batch, summed over the replicas in double precision (as
/// ATen's CPU kernel accumulates), and the global number of values per channel.
struct GlobalStats {
  at::Tensor mean, invstd;  ///< [C], x's type
  at::Tensor var;           ///< [C] biased, double
  double count = 0;
};

GlobalStats global_stats(const at::Tensor& x, ReplicaSum& replicas, double eps) {
  const int64_t c = x.size(1);
  at::Tensor part = at::empty({c + 1}, x.options().dtype(at::kDouble));
  part.narrow(0, 0, c).copy_(x.sum({0, 2, 3}, false, at::kDouble));
  part[c] = static_cast<double>(x.numel() / c);
  replicas.sum(part);
  GlobalStats s;
  s.count = part[c].item<double>();
  const at::Tensor mean = part.narrow(0, 0, c) / s.count;
  at::Tensor sq = (x.to(at::kDouble) - per_channel(mean)).square().sum({0, 2, 3});
  replicas.sum(sq);
  s.var = sq / s.count;
  s.mean = mean.to(x.scalar_type());
  s.invstd = (s.var + eps).rsqrt().to(x.scalar_type());
  return s;
}

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
    ReplicaSum* replicas = current_runtime().replicas;
    at::Tensor y, save_mean, save_invstd;
    if (training && replicas != nullptr) {
      // The global batch's statistics, as one process on the whole batch would use.
      const GlobalStats s = global_stats(x, *replicas, eps);
      save_mean = s.mean;
      save_invstd = s.invstd;
      at::Tensor scale = s.invstd;
      if (weight.defined()) scale = scale * weight;
      y = (x - per_channel(s.mean)) * per_channel(scale);
      if (bias.defined()) y = y + per_channel(bias);
      if (running_mean.has_value() && running_mean->defined()) {
        at::NoGradGuard no_grad;
        const double unbiased = s.count > 1 ? s.count / (s.count - 1) : 1.0;
        running_mean->mul_(1 - momentum).add_(s.mean, momentum);
        running_var->mul_(1 - momentum).add_((s.var * unbiased).to(x.scalar_type()), momentum);
      }
      ctx->saved_data["global_count"] = s.count;
    } else {
      std::tie(y, save_mean, save_invstd) = at::native_batch_norm(
          x, weight, bias, running_mean, running_var, training, momentum, eps);
    }
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
    at::Tensor dx, dweight, dbias;
    if (ctx->saved_data.count("global_count")) {
      std::tie(dx, dweight, dbias) =
          synchronized_grads(ctx, grad_outputs[0], x, weight, mean, stat);
    } else {
      // One call for all three: the weight and bias gradients are the reductions the input
      // gradient needs anyway. In training the statistics are the batch's (save_mean,
      // save_invstd); in evaluation the running ones.
      std::tie(dx, dweight, dbias) =
          training ? at::native_batch_norm_backward(grad_outputs[0], x, weight, {}, {}, mean, stat,
                                                    true, eps, {ctx->needs_input_grad(0), dw, db})
                   : at::native_batch_norm_backward(grad_outputs[0], x, weight, mean, stat, {}, {},
                                                    false, eps, {ctx->needs_input_grad(0), dw, db});
    }
    detail::submit_weight_grad(
        ctx, WeightGradTask{"batch_norm2d", {weight, bias}, [weight, bias, dweight, dbias, dw, db] {
                              if (dw) detail::accumulate_grad(weight, dweight);
                              if (db) detail::accumulate_grad(bias, dbias);
                            }});
    variable_list result(1 + (weight.defined() ? 2 : 0) + 5);
    result[0] = dx;
    return result;
  }

  /// The gradients {dx, dweight, dbias} of the synchronised forward: the input gradient needs
  /// the global batch's sums of dy and dy * (x - mean); the weight and bias gradients are the
  /// local batch's (the gradient exchange sums them over the replicas).
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> synchronized_grads(
      AutogradContext* ctx, const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight,
      const at::Tensor& mean, const at::Tensor& invstd) {
    const double count = ctx->saved_data["global_count"].toDouble();
    const int64_t c = x.size(1);
    const at::Tensor xmu = x - per_channel(mean);
    at::Tensor sums = at::empty({2 * c}, x.options().dtype(at::kDouble));
    sums.narrow(0, 0, c).copy_(dy.sum({0, 2, 3}, false, at::kDouble));
    sums.narrow(0, c, c).copy_((dy * xmu).sum({0, 2, 3}, false, at::kDouble));
    const at::Tensor dbias = sums.narrow(0, 0, c).to(x.scalar_type());
    const at::Tensor dweight = (sums.narrow(0, c, c) * invstd.to(at::kDouble)).to(x.scalar_type());
    detail::captured_runtime(ctx).replicas->sum(sums);
    const at::Tensor mean_dy = (sums.narrow(0, 0, c) / count).to(x.scalar_type());
    const at::Tensor mean_dy_xmu = (sums.narrow(0, c, c) / count).to(x.scalar_type());
    at::Tensor scale = invstd;
    if (weight.defined()) scale = scale * weight;
    const at::Tensor dx =
        (dy - per_channel(mean_dy) - xmu * per_channel(invstd * invstd * mean_dy_xmu)) *
        per_channel(scale);
    return {dx, dweight, dbias};
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
  detail::gate_parameters({weight, bias});
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
