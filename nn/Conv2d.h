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
///
/// Three algorithms compute the same convolution on the CPU (nn/Algorithms.h: the memory planner
/// may replace one by another that needs less workspace; results equal up to floating-point
/// summation order):
///   default  at::convolution's own choice: on a CPU build with oneDNN, oneDNN, which reorders
///            the input and output gradient into its blocked layout (a copy of each);
///   im2col   ATen's im2col + GEMM path (at::_slow_conv2d_*): the columns of the whole batch,
///            C*k*k times the output's spatial size per sample, in forward and again in backward;
///   direct   one kernel offset at a time: the input window that offset reads (no padding copy:
///            only the outputs whose input lies inside the image), samples taken in chunks of at
///            most 512 KiB of window and an eighth of the batch, times that offset's weight matrix,
///            accumulated (forward, weight gradient) or scattered back (input gradient); holds one
///            offset's weight matrix, one chunk's window and their product.
/// On CUDA the layer's algorithms are `default` (ATen's: cuDNN with its heuristics' choice, as
/// PyTorch runs it) and cuDNN's own per pass, named "cudnn:F,BD,BF" (see CudnnAlgorithms): after a
/// forward on CUDA, measure_algorithms() measures every cuDNN algorithm of each pass on the
/// layer's shape (nn/cuda/CudnnConv.h) and offers two such choices, the fastest per pass and the
/// least workspace per pass; the planner sets one by set_algorithm().

#include "nn/Algorithms.h"

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

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

enum class ConvAlgorithm { kDefault, kIm2col, kDirect, kCudnn };
/// "default", "im2col", "direct", "cudnn".
const char* conv_algorithm_name(ConvAlgorithm algorithm);
/// The algorithm of that name; throws std::invalid_argument for another.
ConvAlgorithm parse_conv_algorithm(const std::string& name);

/// ConvAlgorithm::kCudnn's choice: cuDNN's algorithm for each pass (the numbers of cuDNN's
/// cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, nn/cuda/CudnnConv.h), run on CUDA tensors
/// only, never replaced by another without an error.
struct CudnnAlgorithms {
  int forward = 0, backward_data = 0, backward_filter = 0;
  bool operator==(const CudnnAlgorithms& o) const {
    return forward == o.forward && backward_data == o.backward_data &&
           backward_filter == o.backward_filter;
  }
};
/// The layer algorithm's name for them: "cudnn:F,BD,BF" ("cudnn:1,1,0").
std::string cudnn_algorithm_name(const CudnnAlgorithms& algorithms);
/// The algorithms of such a name; false when `name` is not of that form (numbers 0..99, no
/// leading zeros).
bool parse_cudnn_algorithm_name(const std::string& name, CudnnAlgorithms* algorithms);

/// Convolution of x [N, C, H, W] with weight [O, C, k, k]; `bias` [O] may be undefined. Other
/// shapes (a kernel that is not square among them) are refused (c10::Error naming them).
at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  int64_t stride, int64_t padding,
                  ConvAlgorithm algorithm = ConvAlgorithm::kDefault,
                  const CudnnAlgorithms& cudnn = {});

/// The algorithms' kernels, outside autograd (conv2d() calls them; tests compare them). kCudnn:
/// `cudnn`'s algorithms on CUDA float32 tensors, the workspace from the caching allocator, on
/// the current stream (std::invalid_argument for other tensors; nn::cudnn::CudnnError or
/// WorkspaceExceeded from cuDNN; std::runtime_error in a build without nn/cuda/).
at::Tensor conv2d_forward(ConvAlgorithm algorithm, const at::Tensor& x, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t stride, int64_t padding,
                          const CudnnAlgorithms& cudnn = {});
/// Input, weight and bias gradients, each computed only where `mask` asks (else undefined).
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(
    ConvAlgorithm algorithm, const at::Tensor& grad_output, const at::Tensor& x,
    const at::Tensor& weight, bool has_bias, int64_t stride, int64_t padding,
    std::array<bool, 3> mask, const CudnnAlgorithms& cudnn = {});

class Conv2dImpl : public torch::nn::Cloneable<Conv2dImpl>, public AlgorithmLayer {
 public:
  explicit Conv2dImpl(Conv2dOptions options);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

  std::vector<std::string> algorithms() const override;
  /// "default", "im2col", "direct" or "cudnn:F,BD,BF".
  std::string algorithm() const override;
  void set_algorithm(const std::string& name) override;
  std::vector<AlgorithmCost> measure_algorithms(int repeats) override;
  /// Sizes of the last forward's input (empty before any).
  const std::vector<int64_t>& last_input_sizes() const { return last_input_sizes_; }

  Conv2dOptions options;
  at::Tensor weight;  ///< [out, in, k, k]
  at::Tensor bias;    ///< [out], undefined without bias

 private:
  ConvAlgorithm algorithm_ = ConvAlgorithm::kDefault;
  CudnnAlgorithms cudnn_;                  ///< with kCudnn
  std::vector<int64_t> last_input_sizes_;  ///< of the last forward's input
  c10::Device last_input_device_{c10::kCPU};  ///< of the last forward's input
  std::vector<std::string> cudnn_choices_;  ///< "cudnn:..." names measure_algorithms offered
};
TORCH_MODULE(Conv2d);

}  // namespace engram::nn
