#include "nn/detail/CudnnConv2d.h"

#include <stdexcept>
#include <string>

#ifdef ENGRAM_NN_CUDNN
#include "nn/cuda/CudnnConv.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <memory>
#include <mutex>
#endif

namespace engram::nn::detail {

#ifdef ENGRAM_NN_CUDNN
namespace {

namespace cc = nn::cudnn;

/// The math PyTorch's own cuDNN convolutions use now: TF32 while its convolutions' float32
/// precision allows it (torch.backends.cudnn.allow_tf32, or the newer fp32_precision of conv),
/// its default, else FMA only. The same question ATen's convolution asks.
cc::Math current_math() {
  return at::globalContext().allowTF32CuDNN(at::Float32Op::CONV) ? cc::Math::kTf32
                                                                 : cc::Math::kFma;
}

/// Whether only algorithms cuDNN calls deterministic may be chosen, as PyTorch's cuDNN
/// convolutions choose under torch.backends.cudnn.deterministic or deterministic algorithms.
bool determinism_required() {
  const auto& context = at::globalContext();
  return context.deterministicCuDNN() || context.deterministicAlgorithms();
}

/// Runs `f`; nn/cuda's DeviceOutOfMemory (cudaMalloc or cuDNN failing to allocate) comes out as
/// LibTorch's c10::OutOfMemoryError, what the callers that count out-of-memory failures catch.
template <typename F>
auto torch_out_of_memory(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const cc::DeviceOutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "nn::conv2d: cuDNN: ", e.what());
  }
}

cc::ConvShape shape_of(const at::Tensor& x, const at::Tensor& weight, int64_t stride,
                       int64_t padding) {
  return cc::ConvShape{x.size(0),      x.size(1),      x.size(2), x.size(3),
                       weight.size(0), weight.size(2), stride,    padding};
}

/// Shapes whose runners are kept at most: a model's convolutions at a batch or two. Past it the
/// cache starts again (a search over batch sizes would otherwise keep a cuDNN handle per batch).
constexpr std::size_t kMostRunners = 256;

/// The runner of `shape` on `device`, made on first use (a cuDNN handle each).
std::shared_ptr<const cc::CudnnConvRunner> runner_for(const cc::ConvShape& shape, int device) {
  using Key = std::array<int64_t, 10>;
  static std::mutex mutex;
  // Never destroyed: cuDNN's handles are not to be destroyed after the CUDA runtime at exit.
  static auto* runners = new std::map<Key, std::shared_ptr<const cc::CudnnConvRunner>>();
  const cc::Math math = current_math();
  const Key key{device,       shape.batch,  shape.in_channels, shape.height,
                shape.width,  shape.out_channels, shape.kernel, shape.stride,
                shape.padding, static_cast<int64_t>(math)};
  std::lock_guard<std::mutex> lock(mutex);
  auto found = runners->find(key);
  if (found != runners->end()) return found->second;
  if (runners->size() >= kMostRunners) runners->clear();  // runners in use live on
  const c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(device));
  auto runner = torch_out_of_memory(
      [&] { return std::make_shared<const cc::CudnnConvRunner>(shape, math); });
  runners->emplace(key, runner);
  return runner;
}

/// CUDA float32 tensors on one device, or std::invalid_argument.
void check_tensors(const char* what, std::initializer_list<at::Tensor> ts) {
  const at::Tensor& first = *ts.begin();
  for (const auto& t : ts) {
    if (t.defined() && (!t.is_cuda() || t.scalar_type() != at::kFloat))
      throw std::invalid_argument(std::string("nn::conv2d: the cudnn algorithms run on CUDA "
                                              "float32 tensors; ") +
                                  what + " got one on " + t.device().str());
    if (t.defined() && t.device() != first.device())
      throw std::invalid_argument(std::string("nn::conv2d: ") + what + " got tensors on " +
                                  first.device().str() + " and " + t.device().str());
  }
}

/// Runs `pass` with `algorithm` into `out`, its workspace from the caching allocator.
void run(const cc::CudnnConvRunner& runner, cc::Pass pass, int algorithm, const at::Tensor& a,
         const at::Tensor& b, const at::Tensor& out) {
  std::string status;
  const auto need = runner.workspace_bytes(pass, algorithm, &status);
  if (!need)
    throw cc::CudnnError(std::string("nn::conv2d: cuDNN ") + cc::pass_name(pass) + " " +
                         cc::algorithm_label(pass, algorithm) + " on " +
                         runner.shape().to_string() + ": " + status);
  const at::Tensor workspace = at::empty({static_cast<int64_t>(std::max<std::size_t>(*need, 1))},
                                         out.options().dtype(at::kByte));
  torch_out_of_memory([&] {
    runner.run(pass, algorithm, a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
               workspace.data_ptr(), *need,
               c10::cuda::getCurrentCUDAStream(out.device().index()).stream());
  });
}

}  // namespace

at::Tensor cudnn_conv2d_forward(const CudnnAlgorithms& algorithms, const at::Tensor& x,
                                const at::Tensor& weight, const at::Tensor& bias, int64_t stride,
                                int64_t padding) {
  check_tensors("forward", {x, weight, bias});
  const c10::cuda::CUDAGuard on(x.device());
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const cc::ConvShape shape = shape_of(xc, wc, stride, padding);
  const auto runner = runner_for(shape, x.device().index());
  at::Tensor y = at::empty({shape.batch, shape.out_channels, shape.out_height(), shape.out_width()},
                           x.options());
  run(*runner, cc::Pass::kForward, algorithms.forward, xc, wc, y);
  if (bias.defined()) y.add_(bias.view({1, -1, 1, 1}));
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cudnn_conv2d_backward(
    const CudnnAlgorithms& algorithms, const at::Tensor& grad_output, const at::Tensor& x,
    const at::Tensor& weight, bool has_bias, int64_t stride, int64_t padding,
    std::array<bool, 3> mask) {
  check_tensors("backward", {grad_output, x, weight});
  const c10::cuda::CUDAGuard on(x.device());
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous(), g = grad_output.contiguous();
  const cc::ConvShape shape = shape_of(xc, wc, stride, padding);
  const auto runner = runner_for(shape, x.device().index());
  at::Tensor dx, dw, db;
  if (mask[0]) {
    dx = at::empty(xc.sizes(), xc.options());
    run(*runner, cc::Pass::kBackwardData, algorithms.backward_data, wc, g, dx);
  }
  if (mask[1]) {
    dw = at::empty(wc.sizes(), wc.options());
    run(*runner, cc::Pass::kBackwardFilter, algorithms.backward_filter, xc, g, dw);
  }
  if (mask[2] && has_bias) db = g.sum({0, 2, 3});
  return {dx, dw, db};
}

std::pair<CudnnAlgorithms, CudnnAlgorithms> cudnn_choices(const std::vector<int64_t>& input_sizes,
                                                          const std::vector<int64_t>& weight_sizes,
                                                          int64_t stride, int64_t padding,
                                                          int device, int repeats) {
  const cc::ConvShape shape{input_sizes.at(0),  input_sizes.at(1),  input_sizes.at(2),
                            input_sizes.at(3),  weight_sizes.at(0), weight_sizes.at(2),
                            stride,             padding};
  // The choices of a shape measured once per process (per math and determinism): a network's
  // blocks repeat their layers' shapes, and the planner measures every layer.
  using Key = std::array<int64_t, 12>;
  static std::mutex mutex;
  static std::map<Key, std::pair<CudnnAlgorithms, CudnnAlgorithms>> measured;
  const cc::Math math = current_math();
  const bool deterministic = determinism_required();
  const Key key{device,        shape.batch,  shape.in_channels, shape.height,
                shape.width,   shape.out_channels, shape.kernel, shape.stride,
                shape.padding, repeats,      static_cast<int64_t>(math), deterministic};
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = measured.find(key);
    if (found != measured.end()) return found->second;
  }
  const c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(device));
  // CudnnConv takes its buffers and workspaces with cudaMalloc: what the caching allocator holds
  // unused goes back first, so that an algorithm is not left out for want of cached memory.
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  CudnnAlgorithms fastest, least;
  torch_out_of_memory([&] {
    cc::CudnnConv conv(shape, math);
    std::vector<float> x(static_cast<std::size_t>(shape.input_elements()), 0.5f);
    std::vector<float> w(static_cast<std::size_t>(shape.weight_elements()), 0.25f);
    std::vector<float> dy(static_cast<std::size_t>(shape.output_elements()), 1.0f);
    conv.upload(x, w, dy);
    int* fastest_of[] = {&fastest.forward, &fastest.backward_data, &fastest.backward_filter};
    int* least_of[] = {&least.forward, &least.backward_data, &least.backward_filter};
    int i = 0;
    for (const cc::Pass pass : cc::all_passes()) {
      std::vector<cc::AlgorithmCost> costs = conv.measure(pass, std::max(1, repeats));
      if (deterministic) costs = cc::deterministic_only(costs);
      const cc::AlgorithmCost* best = cc::fastest_within(costs, static_cast<std::size_t>(-1));
      const cc::AlgorithmCost* smallest = cc::least_workspace(costs);
      if (best == nullptr || smallest == nullptr)
        throw std::runtime_error(std::string("nn::conv2d: cuDNN runs no ") +
                                 (deterministic ? "deterministic " : "") + cc::pass_name(pass) +
                                 " algorithm on " + shape.to_string());
      *fastest_of[i] = best->algorithm;
      *least_of[i] = smallest->algorithm;
      ++i;
    }
  });
  std::lock_guard<std::mutex> lock(mutex);
  measured[key] = {fastest, least};
  return {fastest, least};
}

#else  // built without nn/cuda/

namespace {
[[noreturn]] void no_cudnn() {
  throw std::runtime_error("nn::conv2d: the cudnn algorithms need nn/cuda/, which this build "
                           "left out (ENGRAM_CUDA=OFF)");
}
}  // namespace

at::Tensor cudnn_conv2d_forward(const CudnnAlgorithms&, const at::Tensor&, const at::Tensor&,
                                const at::Tensor&, int64_t, int64_t) {
  no_cudnn();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cudnn_conv2d_backward(
    const CudnnAlgorithms&, const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
    int64_t, int64_t, std::array<bool, 3>) {
  no_cudnn();
}

std::pair<CudnnAlgorithms, CudnnAlgorithms> cudnn_choices(const std::vector<int64_t>&,
                                                          const std::vector<int64_t>&, int64_t,
                                                          int64_t, int, int) {
  no_cudnn();
}

#endif

}  // namespace engram::nn::detail
