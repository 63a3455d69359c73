#include "nn/Conv2d.h"

#include "memory/CudaMemoryTracker.h"
#include "memory/MemoryTracker.h"
#include "nn/detail/CudnnConv2d.h"
#include "nn/detail/FunctionSupport.h"

#include <ATen/ops/_slow_conv2d_backward.h>
#include <ATen/ops/_slow_conv2d_forward.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <functional>
#include <stdexcept>

namespace engram::nn {
namespace {

using detail::AutogradContext;
using detail::variable_list;
using memory::SavedKind;

/// CudnnAlgorithms packed into one integer for the autograd Function's saved data, and back.
int64_t pack(const CudnnAlgorithms& a) {
  return a.forward | (a.backward_data << 8) | (a.backward_filter << 16);
}
CudnnAlgorithms unpack(int64_t v) {
  return CudnnAlgorithms{static_cast<int>(v & 0xff), static_cast<int>((v >> 8) & 0xff),
                         static_cast<int>((v >> 16) & 0xff)};
}

// --- direct: one kernel offset at a time, the samples in small chunks -------------------------

/// The most bytes of one chunk's window (input or output gradient) or product that the direct
/// algorithm holds at once (see chunk_samples): the GEMMs of deep layers, whose windows are
/// small, still cover several samples.
constexpr int64_t kDirectChunkBytes = int64_t{512} << 10;

struct Geometry {
  int64_t n, c, h, w, o, k, stride, padding, ho, wo;
};

Geometry geometry(const at::Tensor& x, const at::Tensor& weight, int64_t stride, int64_t padding) {
  Geometry g{x.size(0),      x.size(1), x.size(2), x.size(3), weight.size(0),
             weight.size(2), stride,    padding,   0,         0};
  g.ho = (g.h + 2 * padding - g.k) / stride + 1;
  g.wo = (g.w + 2 * padding - g.k) / stride + 1;
  return g;
}

/// Along one spatial axis, the outputs [first, first + count) whose input (out * stride + offset -
/// padding) lies inside [0, size), and the first such input: kernel offset `offset` reads no
/// padding there.
struct Span1d {
  int64_t first = 0, count = 0, input = 0;
};

Span1d valid_span(int64_t offset, int64_t size, int64_t outputs, int64_t stride, int64_t padding) {
  Span1d s;
  const int64_t shift = offset - padding;  // input = out * stride + shift
  int64_t first = 0;
  while (first < outputs && first * stride + shift < 0) ++first;
  int64_t last = outputs - 1;
  while (last >= first && last * stride + shift >= size) --last;
  s.first = first;
  s.count = std::max<int64_t>(0, last - first + 1);
  s.input = first * stride + shift;
  return s;
}

/// What kernel offset (i, j) pairs up: the output window and the input window it reads.
struct OffsetWindows {
  Span1d rows, cols;
  bool empty() const { return rows.count == 0 || cols.count == 0; }
  /// Samples [n0, n1) of the input window: [b, C, rows, cols] (strided, a view).
  at::Tensor input(const at::Tensor& x, const Geometry& g, int64_t n0, int64_t n1) const {
    return x.slice(0, n0, n1)
        .slice(2, rows.input, rows.input + g.stride * (rows.count - 1) + 1, g.stride)
        .slice(3, cols.input, cols.input + g.stride * (cols.count - 1) + 1, g.stride);
  }
  /// Samples [n0, n1) of the output window: [b, O, rows, cols] (a view).
  at::Tensor output(const at::Tensor& y, int64_t n0, int64_t n1) const {
    return y.slice(0, n0, n1)
        .slice(2, rows.first, rows.first + rows.count)
        .slice(3, cols.first, cols.first + cols.count);
  }
};

OffsetWindows windows(const Geometry& g, int64_t i, int64_t j) {
  return {valid_span(i, g.h, g.ho, g.stride, g.padding),
          valid_span(j, g.w, g.wo, g.stride, g.padding)};
}

/// [b, C, r, c] as the matrix [C, b * r * c] (a copy).
at::Tensor channels_by_positions(const at::Tensor& t) {
  return t.permute({1, 0, 2, 3}).reshape({t.size(1), -1});
}

/// Samples per chunk for windows of `per_sample` elements of `element_size` bytes, out of
/// `samples`: at most kDirectChunkBytes of window, and at most an eighth of the batch, so that
/// the workspace stays a small share of what the layer's activations hold at any batch size.
int64_t chunk_samples(int64_t per_sample, int64_t element_size, int64_t samples) {
  const int64_t by_bytes = kDirectChunkBytes / std::max<int64_t>(1, per_sample * element_size);
  return std::max<int64_t>(1, std::min(by_bytes, samples / 8));
}

/// Every algorithm takes one kernel size, k of a weight [O, C, k, k], and x's channels from it.
void check_shapes(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == weight.size(3),
              "nn::conv2d: a weight [O, C, k, k] expected, got ", weight.sizes());
  TORCH_CHECK(x.dim() == 4 && x.size(1) == weight.size(1), "nn::conv2d: input [N, ",
              weight.size(1), ", H, W] expected, got ", x.sizes());
}

at::Tensor direct_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          int64_t stride, int64_t padding) {
  const Geometry g = geometry(x, weight, stride, padding);
  at::Tensor y = at::empty({g.n, g.o, g.ho, g.wo}, x.options());
  if (bias.defined()) {
    y.copy_(bias.view({1, g.o, 1, 1}).expand_as(y));
  } else {
    y.zero_();
  }
  for (int64_t i = 0; i < g.k; ++i) {
    for (int64_t j = 0; j < g.k; ++j) {
      const OffsetWindows win = windows(g, i, j);
      if (win.empty()) continue;
      const at::Tensor w = weight.select(3, j).select(2, i).contiguous();  // [O, C]
      // The window has C channels, its product O: the larger bounds the chunk.
      const int64_t per_sample = std::max(g.c, g.o) * win.rows.count * win.cols.count;
      const int64_t chunk = chunk_samples(per_sample, x.element_size(), g.n);
      for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
        const int64_t n1 = std::min(g.n, n0 + chunk);
        const at::Tensor product = at::mm(w, channels_by_positions(win.input(x, g, n0, n1)));
        win.output(y, n0, n1).add_(
            product.view({g.o, n1 - n0, win.rows.count, win.cols.count}).permute({1, 0, 2, 3}));
      }
    }
  }
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> direct_backward(
    const at::Tensor& grad_output, const at::Tensor& x, const at::Tensor& weight, bool has_bias,
    int64_t stride, int64_t padding, std::array<bool, 3> mask) {
  const Geometry g = geometry(x, weight, stride, padding);
  at::Tensor dx, dw, db;
  if (mask[0]) dx = at::zeros_like(x, at::MemoryFormat::Contiguous);
  if (mask[1]) dw = at::zeros_like(weight, at::MemoryFormat::Contiguous);
  for (int64_t i = 0; i < g.k && (mask[0] || mask[1]); ++i) {
    for (int64_t j = 0; j < g.k; ++j) {
      const OffsetWindows win = windows(g, i, j);
      if (win.empty()) continue;
      const int64_t positions = win.rows.count * win.cols.count;
      const int64_t chunk =
          chunk_samples(std::max(g.c, g.o) * positions, grad_output.element_size(), g.n);
      const at::Tensor w = mask[0] ? weight.select(3, j).select(2, i).contiguous() : at::Tensor();
      at::Tensor dw_offset = mask[1] ? at::zeros({g.o, g.c}, weight.options()) : at::Tensor();
      for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
        const int64_t n1 = std::min(g.n, n0 + chunk);
        const at::Tensor dy = channels_by_positions(win.output(grad_output, n0, n1));
        if (mask[0]) {
          // This offset's share of the input gradient, scattered back to where it read.
          win.input(dx, g, n0, n1)
              .add_(at::mm(w.t(), dy)
                        .view({g.c, n1 - n0, win.rows.count, win.cols.count})
                        .permute({1, 0, 2, 3}));
        }
        if (mask[1]) {
          dw_offset.addmm_(dy, channels_by_positions(win.input(x, g, n0, n1)).t());
        }
      }
      if (mask[1]) dw.select(3, j).select(2, i).copy_(dw_offset);
    }
  }
  if (mask[2] && has_bias) db = grad_output.sum({0, 2, 3});
  return {dx, dw, db};
}

/// The bytes of the defined tensors among `ts`.
int64_t defined_bytes(std::initializer_list<at::Tensor> ts) {
  int64_t bytes = 0;
  for (const auto& t : ts) {
    if (t.defined()) bytes += static_cast<int64_t>(t.nbytes());
  }
  return bytes;
}

double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return 0;
  return (a - b).abs().max().item<double>();
}

/// max_abs_difference over the largest absolute value of `reference`.
double max_rel_difference(const at::Tensor& a, const at::Tensor& reference) {
  if (!a.defined() || !reference.defined()) return 0;
  const double scale = reference.abs().max().item<double>();
  return scale > 0 ? max_abs_difference(a, reference) / scale : max_abs_difference(a, reference);
}

struct Conv2dFunction : public torch::autograd::Function<Conv2dFunction> {
  // `params` is {weight} or {weight, bias}: undefined tensors cannot be autograd inputs.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params,
                            int64_t stride, int64_t padding, int64_t algorithm, int64_t cudnn) {
    const at::Tensor& weight = params[0];
    const at::Tensor bias = params.size() > 1 ? params[1] : at::Tensor();
    check_shapes(x, weight);
    detail::capture_runtime(ctx);
    detail::save(ctx, "x", x, SavedKind::activation);
    detail::save(ctx, "weight", weight, SavedKind::parameter);
    if (bias.defined()) detail::save(ctx, "bias", bias, SavedKind::parameter);
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["algorithm"] = algorithm;
    ctx->saved_data["cudnn"] = cudnn;
    return conv2d_forward(static_cast<ConvAlgorithm>(algorithm), x, weight, bias, stride, padding,
                          unpack(cudnn));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor x = detail::load(ctx, "x");
    const at::Tensor weight = detail::load(ctx, "weight");
    const bool has_bias = ctx->saved_data.count("bias") > 0;
    const at::Tensor bias = has_bias ? detail::load(ctx, "bias") : at::Tensor();
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const int64_t padding = ctx->saved_data["padding"].toInt();
    const auto algorithm = static_cast<ConvAlgorithm>(ctx->saved_data["algorithm"].toInt());
    const CudnnAlgorithms cudnn = unpack(ctx->saved_data["cudnn"].toInt());
    const at::Tensor g = grad_outputs[0].contiguous();
    detail::submit_weight_grad(
        ctx,
        WeightGradTask{"conv2d", {weight, bias},
                       [x, weight, bias, g, stride, padding, algorithm, cudnn] {
                         const bool dw = weight.requires_grad();
                         const bool db = bias.defined() && bias.requires_grad();
                         auto grads = conv2d_backward(algorithm, g, x, weight, bias.defined(),
                                                      stride, padding, {false, dw, db}, cudnn);
                         if (dw) detail::accumulate_grad(weight, std::get<1>(grads));
                         if (db) detail::accumulate_grad(bias, std::get<2>(grads));
                       }});
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      dx = std::get<0>(conv2d_backward(algorithm, g, x, weight, has_bias, stride, padding,
                                       {true, false, false}, cudnn));
    }
    variable_list grads(1 + (has_bias ? 2 : 1) + 4);
    grads[0] = dx;
    return grads;
  }
};

}  // namespace

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::kIm2col:
      return "im2col";
    case ConvAlgorithm::kDirect:
      return "direct";
    case ConvAlgorithm::kCudnn:
      return "cudnn";
    default:
      return "default";
  }
}

ConvAlgorithm parse_conv_algorithm(const std::string& name) {
  for (auto a : {ConvAlgorithm::kDefault, ConvAlgorithm::kIm2col, ConvAlgorithm::kDirect,
                 ConvAlgorithm::kCudnn}) {
    if (name == conv_algorithm_name(a)) return a;
  }
  throw std::invalid_argument("no convolution algorithm '" + name +
                              "' (default, im2col, direct, cudnn:F,BD,BF)");
}

std::string cudnn_algorithm_name(const CudnnAlgorithms& a) {
  return "cudnn:" + std::to_string(a.forward) + "," + std::to_string(a.backward_data) + "," +
         std::to_string(a.backward_filter);
}

bool parse_cudnn_algorithm_name(const std::string& name, CudnnAlgorithms* algorithms) {
  const std::string prefix = "cudnn:";
  if (name.rfind(prefix, 0) != 0) return false;
  int values[3];
  std::size_t at = prefix.size();
  for (int i = 0; i < 3; ++i) {
    std::size_t end = at;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end == at || end - at > 2 || (end - at == 2 && name[at] == '0')) return false;
    values[i] = std::stoi(name.substr(at, end - at));
    if (i < 2) {
      if (end >= name.size() || name[end] != ',') return false;
      at = end + 1;
    } else if (end != name.size()) {
      return false;
    }
  }
  if (algorithms != nullptr) *algorithms = CudnnAlgorithms{values[0], values[1], values[2]};
  return true;
}

at::Tensor conv2d_forward(ConvAlgorithm algorithm, const at::Tensor& x, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t stride, int64_t padding,
                          const CudnnAlgorithms& cudnn) {
  check_shapes(x, weight);
  switch (algorithm) {
    case ConvAlgorithm::kCudnn:
      return detail::cudnn_conv2d_forward(cudnn, x, weight, bias, stride, padding);
    case ConvAlgorithm::kIm2col: {
      const int64_t k = weight.size(2);
      return at::_slow_conv2d_forward(
          x.contiguous(), weight.contiguous(), {k, k},
          bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt, {stride, stride},
          {padding, padding});
    }
    case ConvAlgorithm::kDirect:
      return direct_forward(x, weight, bias, stride, padding);
    default:
      return at::convolution(x, weight, bias, {stride, stride}, {padding, padding}, {1, 1},
                             /*transposed=*/false, {0, 0}, /*groups=*/1);
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(
    ConvAlgorithm algorithm, const at::Tensor& grad_output, const at::Tensor& x,
    const at::Tensor& weight, bool has_bias, int64_t stride, int64_t padding,
    std::array<bool, 3> mask, const CudnnAlgorithms& cudnn) {
  check_shapes(x, weight);
  mask[2] = mask[2] && has_bias;
  switch (algorithm) {
    case ConvAlgorithm::kCudnn:
      return detail::cudnn_conv2d_backward(cudnn, grad_output, x, weight, has_bias, stride,
                                           padding, mask);
    case ConvAlgorithm::kIm2col: {
      const int64_t k = weight.size(2);
      return at::_slow_conv2d_backward(grad_output.contiguous(), x.contiguous(),
                                       weight.contiguous(), {k, k}, {stride, stride},
                                       {padding, padding}, mask);
    }
    case ConvAlgorithm::kDirect:
      return direct_backward(grad_output, x, weight, has_bias, stride, padding, mask);
    default: {
      std::vector<int64_t> bias_sizes{weight.size(0)};
      return at::convolution_backward(
          grad_output, x, weight,
          mask[2] ? c10::OptionalIntArrayRef(bias_sizes) : c10::OptionalIntArrayRef(),
          {stride, stride}, {padding, padding}, {1, 1}, false, {0, 0}, 1, mask);
    }
  }
}

at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  int64_t stride, int64_t padding, ConvAlgorithm algorithm,
                  const CudnnAlgorithms& cudnn) {
  TORCH_CHECK(weight.defined(), "nn::conv2d: undefined weight");
  detail::gate_parameters({weight, bias});
  detail::SavingScope saving({x, weight, bias});
  const auto a = static_cast<int64_t>(algorithm);
  if (bias.defined()) {
    return Conv2dFunction::apply(x, at::TensorList({weight, bias}), stride, padding, a,
                                 pack(cudnn));
  }
  return Conv2dFunction::apply(x, at::TensorList(weight), stride, padding, a, pack(cudnn));
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
  last_input_sizes_ = x.sizes().vec();
  last_input_device_ = x.device();
  return nn::conv2d(x, weight, bias, options.stride(), options.padding(), algorithm_, cudnn_);
}

std::vector<std::string> Conv2dImpl::algorithms() const {
  if (last_input_device_.is_cuda()) {
    std::vector<std::string> names{conv_algorithm_name(ConvAlgorithm::kDefault)};
    names.insert(names.end(), cudnn_choices_.begin(), cudnn_choices_.end());
    return names;
  }
  return {conv_algorithm_name(ConvAlgorithm::kDefault), conv_algorithm_name(ConvAlgorithm::kIm2col),
          conv_algorithm_name(ConvAlgorithm::kDirect)};
}

std::string Conv2dImpl::algorithm() const {
  return algorithm_ == ConvAlgorithm::kCudnn ? cudnn_algorithm_name(cudnn_)
                                             : conv_algorithm_name(algorithm_);
}

void Conv2dImpl::set_algorithm(const std::string& name) {
  CudnnAlgorithms cudnn;
  if (parse_cudnn_algorithm_name(name, &cudnn)) {
    algorithm_ = ConvAlgorithm::kCudnn;
    cudnn_ = cudnn;
    return;
  }
  const ConvAlgorithm a = parse_conv_algorithm(name);
  if (a == ConvAlgorithm::kCudnn)
    throw std::invalid_argument("convolution algorithm 'cudnn' names each pass's: cudnn:F,BD,BF");
  algorithm_ = a;
}

std::vector<AlgorithmCost> Conv2dImpl::measure_algorithms(int repeats) {
  if (last_input_sizes_.empty())
    throw std::logic_error("Conv2d::measure_algorithms before any forward");
  // The bytes from the tracker of the input's device, the times of kernels that have run.
  std::function<void()> begin_window, synchronize = [] {};
  std::function<memory::MemoryWindow()> end_window;
  if (last_input_device_.is_cuda()) {
    auto* tracker = memory::CudaMemoryTracker::installed(last_input_device_.index());
    if (tracker == nullptr || !memory::CudaMemoryTracker::hooked())
      throw std::logic_error("Conv2d::measure_algorithms on CUDA needs the CUDA memory tracker");
    begin_window = [tracker] { tracker->begin_window(); };
    end_window = [tracker]() -> memory::MemoryWindow { return tracker->end_window(); };
    const c10::Device device = last_input_device_;
    synchronize = [device] {
      const c10::cuda::CUDAGuard on(device);
      c10::cuda::device_synchronize();
    };
    // cuDNN's own choices on this shape: the fastest and the least workspace of each pass.
    const auto [fastest, least] =
        detail::cudnn_choices(last_input_sizes_, weight.sizes().vec(), options.stride(),
                              options.padding(), last_input_device_.index(),
                              std::max(1, repeats));
    cudnn_choices_ = {cudnn_algorithm_name(fastest)};
    if (!(least == fastest)) cudnn_choices_.push_back(cudnn_algorithm_name(least));
  } else {
    auto* tracker = memory::MemoryTracker::installed();
    if (tracker == nullptr) throw std::logic_error("Conv2d::measure_algorithms needs the tracker");
    begin_window = [tracker] { tracker->begin_window(); };
    end_window = [tracker] { return tracker->end_window(); };
  }
  torch::NoGradGuard no_grad;
  const at::Tensor w = weight.detach(), b = bias.defined() ? bias.detach() : at::Tensor();
  const int64_t s = options.stride(), p = options.padding();
  const at::Tensor x = at::randn(last_input_sizes_, w.options());
  const bool has_bias = b.defined();
  const std::array<bool, 3> all{true, true, has_bias};
  const auto ms_since = [&](std::chrono::steady_clock::time_point t) {
    synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<AlgorithmCost> costs;
  at::Tensor grad_output, y0, dx0, dw0, db0;  // the default's results, on the same tensors
  for (const auto& name : algorithms()) {
    CudnnAlgorithms ca;
    const ConvAlgorithm a =
        parse_cudnn_algorithm_name(name, &ca) ? ConvAlgorithm::kCudnn : parse_conv_algorithm(name);
    AlgorithmCost c;
    c.algorithm = name;
    // Warm-up, and the bytes: what the run held beyond its inputs and its results.
    synchronize();
    begin_window();
    at::Tensor y = conv2d_forward(a, x, w, b, s, p, ca);
    synchronize();
    memory::MemoryWindow fw = end_window();
    if (!grad_output.defined()) grad_output = at::randn(y.sizes(), y.options());
    begin_window();
    auto [dx, dw, db] = conv2d_backward(a, grad_output, x, w, has_bias, s, p, all, ca);
    synchronize();
    memory::MemoryWindow bw = end_window();
    c.workspace_bytes = std::max(fw.peak_bytes - fw.start_live_bytes - defined_bytes({y}),
                                 bw.peak_bytes - bw.start_live_bytes - defined_bytes({dx, dw, db}));
    if (a == ConvAlgorithm::kDefault) {
      y0 = y, dx0 = dx, dw0 = dw, db0 = db;
    } else {
      c.max_abs_diff = std::max({max_abs_difference(y, y0), max_abs_difference(dx, dx0),
                                 max_abs_difference(dw, dw0), max_abs_difference(db, db0)});
      c.max_rel_diff = std::max({max_rel_difference(y, y0), max_rel_difference(dx, dx0),
                                 max_rel_difference(dw, dw0), max_rel_difference(db, db0)});
    }
    std::vector<double> forward_ms, backward_ms;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      synchronize();
      auto t = std::chrono::steady_clock::now();
      y = conv2d_forward(a, x, w, b, s, p, ca);
      forward_ms.push_back(ms_since(t));
      t = std::chrono::steady_clock::now();
      std::tie(dx, dw, db) = conv2d_backward(a, grad_output, x, w, has_bias, s, p, all, ca);
      backward_ms.push_back(ms_since(t));
    }
    c.forward_ms = median(forward_ms);
    c.backward_ms = median(backward_ms);
    costs.push_back(std::move(c));
  }
  return costs;
}

}  // namespace engram::nn
