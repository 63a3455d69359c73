#pragma once
/// \file
/// Batch normalization over the channels of [N, C, H, W] as an autograd Function of nn/. In
/// training it normalizes with the batch statistics and updates the running ones (as
/// torch::nn::BatchNorm2d: momentum 0.1, unbiased running variance); in evaluation it uses the
/// running statistics. While a recomputed unit reruns its forward (nn/Recompute.h) it neither
/// reads nor updates the running statistics.
///
/// \code
///   engram::nn::BatchNorm2d bn(engram::nn::BatchNorm2dOptions(64));
///   at::Tensor y = bn(x);
/// \endcode
///
/// Saves its input, the batch mean and inverse standard deviation. Backward runs
/// at::native_batch_norm_backward once for all three gradients (the weight and bias gradients are
/// two reductions that the input gradient needs anyway) and leaves accumulating weight and bias
/// gradients to the scheduler's task.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace engram::nn {

struct BatchNorm2dOptions {
  explicit BatchNorm2dOptions(int64_t num_features) : num_features_(num_features) {}
  TORCH_ARG(int64_t, num_features);
  TORCH_ARG(double, eps) = 1e-5;
  /// Weight of the new batch statistic in the running average.
  TORCH_ARG(double, momentum) = 0.1;
  /// Learn a scale (weight) and shift (bias) per channel.
  TORCH_ARG(bool, affine) = true;
};

/// Functional form. `weight`, `bias` may be undefined (no affine); in training the running
/// statistics (if defined) are updated in place.
at::Tensor batch_norm2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& running_mean, const at::Tensor& running_var,
                        bool training, double momentum, double eps);

class BatchNorm2dImpl : public torch::nn::Cloneable<BatchNorm2dImpl> {
 public:
  explicit BatchNorm2dImpl(BatchNorm2dOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  BatchNorm2dOptions options;
  at::Tensor weight, bias;               ///< [C] (when affine): ones and zeros at first
  at::Tensor running_mean, running_var;  ///< [C] buffers
  at::Tensor num_batches_tracked;        ///< buffer, as torch's
};
TORCH_MODULE(BatchNorm2d);

}  // namespace engram::nn
