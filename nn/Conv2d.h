#pragma once
/// \file
/// 2-D convolution as an autograd Function of nn/. Backward calls at::convolution_backward twice
/// with an output mask: the input gradient at once, weight and bias gradients in the scheduler's
/// task.
///
/// \code
///   engram::nn::Conv2d conv(engram::nn::Conv2dOptions(3, 64, 3).padding(1).bias(false));
///   at::Tensor y = conv(x);                      // x [N, 3, H, W] -> y [N, 64, H, W]
/// \endcode
///
/// Parameters and initialization as torch::nn::Conv2d. Square kernels, strides and paddings;
/// no groups, no dilation.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace engram::nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  /// Side of the square kernel.
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride) = 1;
  /// Zero padding on every side.
  TORCH_ARG(int64_t, padding) = 0;
  TORCH_ARG(bool, bias) = true;
};

/// Convolution of x [N, C, H, W] with weight [O, C, k, k]; `bias` [O] may be undefined.
at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  int64_t stride, int64_t padding);

class Conv2dImpl : public torch::nn::Cloneable<Conv2dImpl> {
 public:
  explicit Conv2dImpl(Conv2dOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  Conv2dOptions options;
  at::Tensor weight;  ///< [out, in, k, k]
  at::Tensor bias;    ///< [out], undefined without bias
};
TORCH_MODULE(Conv2d);

}  // namespace engram::nn
