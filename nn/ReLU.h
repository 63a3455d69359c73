#pragma once
/// \file
/// Rectified linear unit as an autograd Function of nn/. It saves its output (through the
/// activation store, as SavedKind::relu_output), from which the backward mask y > 0 follows, so
/// the in-place form needs no copy of its input: the in-place ReLU of a ResNet stores one tensor
/// per activation. A compressing store (memory/CompressingStore.h) keeps that output as bitmap
/// plus nonzero values, shared with the next layer, which saves the same tensor as its input.
///
/// \code
///   engram::nn::ReLU relu(engram::nn::ReLUOptions().inplace(true));
///   at::Tensor y = relu(x);          // x itself, rectified, when inplace
///   at::Tensor z = engram::nn::relu(x, /*inplace=*/false);
/// \endcode
///
/// In place, `x` must not be a leaf that requires a gradient (as torch's relu_).

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace engram::nn {

struct ReLUOptions {
  /// Rectify the input tensor itself rather than a copy.
  TORCH_ARG(bool, inplace) = false;
};

at::Tensor relu(const at::Tensor& x, bool inplace = false);

class ReLUImpl : public torch::nn::Cloneable<ReLUImpl> {
 public:
  explicit ReLUImpl(ReLUOptions options = {}) : options(options) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& x);

  ReLUOptions options;
};
TORCH_MODULE(ReLU);

}  // namespace engram::nn
