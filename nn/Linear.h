#pragma once
/// \file
/// Fully connected layer y = x W^T + b as an autograd Function of nn/ (saved tensors through the
/// activation store, weight gradients through the gradient scheduler; nn/Runtime.h).
///
/// \code
///   engram::nn::Linear fc(engram::nn::LinearOptions(128, 64));
///   at::Tensor y = fc(x);                               // x [..., 128] -> y [..., 64]
///   at::Tensor z = engram::nn::linear(x, w, b);          // functional form; b may be undefined
/// \endcode
///
/// Backward: dX = dY W at once; the task computes dW = dY^T X and db = column sums of dY.
/// Parameters and initialization as torch::nn::Linear (same names, same random draws).

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace engram::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  /// Width of each input row.
  TORCH_ARG(int64_t, in_features);
  /// Width of each output row.
  TORCH_ARG(int64_t, out_features);
  /// Whether to learn an additive bias.
  TORCH_ARG(bool, bias) = true;
};

/// y = x weight^T + bias for x [..., in]; `bias` may be undefined.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

class LinearImpl : public torch::nn::Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features)
      : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(LinearOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  LinearOptions options;
  at::Tensor weight;  ///< [out, in]
  at::Tensor bias;    ///< [out], undefined without bias
};
TORCH_MODULE(Linear);

}  // namespace engram::nn
