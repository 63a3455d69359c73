#pragma once
/// \file
/// ConvAlgorithm::kCudnn's kernels for nn/Conv2d.cpp: cuDNN's chosen algorithm per pass on CUDA
/// tensors through nn/cuda/'s CudnnConvRunner (one per device and shape, cached), the workspace
/// from LibTorch's caching allocator, on the current stream, in the math PyTorch's settings ask
/// for (TF32 or FMA). Internal to nn/; built without nn/cuda/ (ENGRAM_CUDA=OFF) every call
/// throws std::runtime_error.

#include "nn/Conv2d.h"

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace engram::nn::detail {

at::Tensor cudnn_conv2d_forward(const CudnnAlgorithms& algorithms, const at::Tensor& x,
                                const at::Tensor& weight, const at::Tensor& bias, int64_t stride,
                                int64_t padding);

std::tuple<at::Tensor, at::Tensor, at::Tensor> cudnn_conv2d_backward(
    const CudnnAlgorithms& algorithms, const at::Tensor& grad_output, const at::Tensor& x,
    const at::Tensor& weight, bool has_bias, int64_t stride, int64_t padding,
    std::array<bool, 3> mask);

/// cuDNN's two choices for a layer of this input and weight shape on CUDA device `device`,
/// measured by nn/cuda's CudnnConv (every algorithm of every pass, `repeats` timed runs, on its
/// own buffers): the fastest of each pass, and the least workspace of each pass (the faster of
/// equal ones), measured once per shape in a process. Both follow PyTorch's settings as its own
/// cuDNN convolutions do: the math is TF32 while at::Context::allowTF32CuDNN holds, else FMA;
/// under deterministic cuDNN or deterministic algorithms only the algorithms cuDNN calls
/// deterministic are chosen. Throws std::runtime_error when a pass has no such algorithm, and
/// c10::OutOfMemoryError when the device cannot hold the measurement's buffers.
std::pair<CudnnAlgorithms, CudnnAlgorithms> cudnn_choices(const std::vector<int64_t>& input_sizes,
                                                          const std::vector<int64_t>& weight_sizes,
                                                          int64_t stride, int64_t padding,
                                                          int device, int repeats);

}  // namespace engram::nn::detail
