// cuDNN's legacy convolution API (cudnnConvolutionForward and the others, as PyTorch's
// ATen/native/cudnn/Conv_v7.cpp uses it): deprecated in cuDNN 9 in favour of the graph API, still
// shipped and supported. Its deprecation warnings are silenced here only.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "nn/cuda/CudnnConv.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <mutex>
#include <sstream>
#include <utility>

namespace engram::nn::cudnn {
namespace {

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) throw_cudnn_error(status, what);
}

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    cudaGetLastError();  // clears the error, so that the next call does not report it again
    throw_cuda_error(error, what);
  }
}

/// Device memory of one size; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check(cudaMalloc(&p_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : p_(std::exchange(other.p_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (p_ != nullptr) cudaFree(p_);
      p_ = std::exchange(other.p_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

int as_int(std::int64_t v, const char* what) {
  if (v > 0x7fffffff) throw std::invalid_argument(std::string(what) + " is too large for cuDNN");
  return static_cast<int>(v);
}

std::size_t bytes_of(std::int64_t elements) {
  return static_cast<std::size_t>(elements) * sizeof(float);
}

const char* const kForwardNames[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
const char* const kBackwardDataNames[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                          "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
const char* const kBackwardFilterNames[] = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
static_assert(std::size(kForwardNames) == CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 0u);
static_assert(std::size(kBackwardDataNames) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT + 0u);
static_assert(std::size(kBackwardFilterNames) == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT + 0u);

int algorithm_count(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case Pass::kBackwardData:
      return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    case Pass::kBackwardFilter:
      return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
  return 0;
}

std::string algorithm_name(Pass pass, int algorithm) {
  if (algorithm < 0 || algorithm >= algorithm_count(pass))
    return "algorithm " + std::to_string(algorithm);
  switch (pass) {
    case Pass::kForward:
      return kForwardNames[algorithm];
    case Pass::kBackwardData:
      return kBackwardDataNames[algorithm];
    case Pass::kBackwardFilter:
      return kBackwardFilterNames[algorithm];
  }
  return {};
}

/// Two CUDA events, destroyed with it.
class EventPair {
 public:
  EventPair() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    if (const cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
      cudaEventDestroy(start);
      check(e, "cudaEventCreate");
    }
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start = nullptr, stop = nullptr;
};

/// Median milliseconds of `run` over `repeats` runs after one warm-up, timed with CUDA events on
/// the legacy default stream.
template <typename Run>
double median_ms(int repeats, Run&& run) {
  EventPair events;
  std::vector<double> ms;
  run();
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(events.start), "cudaEventRecord");
    run();
    check(cudaEventRecord(events.stop), "cudaEventRecord");
    check(cudaEventSynchronize(events.stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, events.start, events.stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0 : ms[ms.size() / 2];
}

/// cuDNN's word that it does not run this configuration (any of its NOT_SUPPORTED codes), as
/// opposed to a failure.
bool not_supported(cudnnStatus_t status) {
  return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED;
}

/// cuDNN could not allocate host or device memory: the device is full, nothing is broken.
bool allocation_failed(cudnnStatus_t status) {
  return status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
         status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
}

}  // namespace

void ConvShape::check() const {
  for (const std::int64_t v : {batch, in_channels, height, width, out_channels, kernel, stride})
    if (v < 1)
      throw std::invalid_argument("convolution shape " + to_string() + ": sizes must be positive");
  if (padding < 0)
    throw std::invalid_argument("convolution shape " + to_string() + ": negative padding");
  if (height + 2 * padding < kernel || width + 2 * padding < kernel)
    throw std::invalid_argument("convolution shape " + to_string() +
                                ": the kernel is larger than the padded input");
  const std::pair<const char*, std::int64_t> tensors[] = {
      {"input", input_elements()}, {"weight", weight_elements()}, {"output", output_elements()}};
  for (const auto& [name, elements] : tensors) {
    if (elements > kMaxDescriptorElements) {
      throw std::invalid_argument(
          "convolution shape " + to_string() + ": its " + name + " has " +
          std::to_string(elements) + " elements, more than cuDNN's tensor descriptors hold (" +
          std::to_string(kMaxDescriptorElements) + "); a smaller batch runs");
    }
  }
}

std::string ConvShape::to_string() const {
  std::ostringstream s;
  s << batch << "x" << in_channels << "x" << height << "x" << width << " -> " << out_channels
    << ", k" << kernel << " s" << stride << " p" << padding;
  return s.str();
}

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "forward";
    case Pass::kBackwardData:
      return "backward_data";
    case Pass::kBackwardFilter:
      return "backward_filter";
  }
  return "?";
}

Pass parse_pass(const std::string& name) {
  for (const Pass p : all_passes())
    if (name == pass_name(p)) return p;
  throw std::invalid_argument("unknown convolution pass '" + name +
                              "' (forward, backward_data, backward_filter)");
}

std::vector<Pass> all_passes() {
  return {Pass::kForward, Pass::kBackwardData, Pass::kBackwardFilter};
}

const AlgorithmCost* fastest_within(const std::vector<AlgorithmCost>& costs, std::size_t limit) {
  const AlgorithmCost* best = nullptr;
  for (const AlgorithmCost& c : costs)
    if (c.supported && c.workspace_bytes <= limit && (best == nullptr || c.ms < best->ms))
      best = &c;
  return best;
}

const AlgorithmCost* least_workspace(const std::vector<AlgorithmCost>& costs) {
  const AlgorithmCost* least = nullptr;
  for (const AlgorithmCost& c : costs) {
    if (!c.supported) continue;
    if (least == nullptr || c.workspace_bytes < least->workspace_bytes ||
        (c.workspace_bytes == least->workspace_bytes && c.ms < least->ms))
      least = &c;
  }
  return least;
}

std::vector<AlgorithmCost> deterministic_only(const std::vector<AlgorithmCost>& costs) {
  std::vector<AlgorithmCost> kept;
  for (const AlgorithmCost& c : costs)
    if (c.deterministic.value_or(false)) kept.push_back(c);
  return kept;
}

const AlgorithmCost* heuristic_default(const std::vector<AlgorithmCost>& costs) {
  const AlgorithmCost* best = nullptr;
  for (const AlgorithmCost& c : costs)
    if (c.supported && c.heuristic_rank >= 0 &&
        (best == nullptr || c.heuristic_rank < best->heuristic_rank))
      best = &c;
  return best;
}

bool device_available(std::string* why) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = cudaGetErrorString(e);
    return false;
  }
  if (devices == 0) {
    if (why != nullptr) *why = "no CUDA device";
    return false;
  }
  return true;
}

std::size_t cudnn_version() { return cudnnGetVersion(); }

void throw_cuda_error(int cuda_error, const char* what) {
  const auto error = static_cast<cudaError_t>(cuda_error);
  const std::string message = std::string(what) + ": " + cudaGetErrorString(error);
  if (error == cudaErrorMemoryAllocation) throw DeviceOutOfMemory(message);
  throw CudnnError(message);
}

void throw_cudnn_error(int cudnn_status, const char* what) {
  const auto status = static_cast<cudnnStatus_t>(cudnn_status);
  const std::string message = std::string(what) + ": " + cudnnGetErrorString(status);
  if (allocation_failed(status)) throw DeviceOutOfMemory(message);
  throw CudnnError(message);
}

namespace {

/// A cuDNN handle and the descriptors of one shape: float32 NCHW, cross-correlation, `math`.
/// Throws CudnnError without a device or when cuDNN refuses the shape.
struct Descriptors {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descriptors(const ConvShape& shape, Math math) {
    shape.check();
    std::string why;
    if (!device_available(&why)) throw CudnnError("no CUDA device: " + why);
    try {
      set_up(shape, math);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~Descriptors() { destroy(); }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  void destroy() {
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (handle != nullptr) cudnnDestroy(handle);
    conv = nullptr, w = nullptr, y = nullptr, x = nullptr, handle = nullptr;
  }

  void set_up(const ConvShape& shape, Math math) {
    check(cudnnCreate(&handle), "cudnnCreate");
    check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                     as_int(shape.batch, "batch"),
                                     as_int(shape.in_channels, "in_channels"),
                                     as_int(shape.height, "height"), as_int(shape.width, "width")),
          "cudnnSetTensor4dDescriptor (input)");
    check(cudnnSetFilter4dDescriptor(
              w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, as_int(shape.out_channels, "out_channels"),
              as_int(shape.in_channels, "in_channels"), as_int(shape.kernel, "kernel"),
              as_int(shape.kernel, "kernel")),
          "cudnnSetFilter4dDescriptor");
    const int pad = as_int(shape.padding, "padding"), stride = as_int(shape.stride, "stride");
    // Cross-correlation, as every deep-learning framework's "convolution".
    check(cudnnSetConvolution2dDescriptor(conv, pad, pad, stride, stride, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    // As PyTorch's own descriptors: float32 without TF32 is FMA math; with it, the default math,
    // under which cuDNN uses TF32 tensor cores where the device has them.
    check(cudnnSetConvolutionMathType(conv, math == Math::kTf32 ? CUDNN_DEFAULT_MATH
                                                                : CUDNN_FMA_MATH),
          "cudnnSetConvolutionMathType");
    int n = 0, c = 0, h = 0, wd = 0;
    check(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd),
          "cudnnGetConvolution2dForwardOutputDim");
    if (n != shape.batch || c != shape.out_channels || h != shape.out_height() ||
        wd != shape.out_width())
      throw CudnnError("cuDNN's output shape differs from the layer's for " + shape.to_string());
    check(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, wd),
          "cudnnSetTensor4dDescriptor (output)");
  }

  cudnnStatus_t workspace(Pass pass, int algorithm, std::size_t* bytes) const {
    switch (pass) {
      case Pass::kForward:
        return cudnnGetConvolutionForwardWorkspaceSize(
            handle, x, w, conv, y, static_cast<cudnnConvolutionFwdAlgo_t>(algorithm), bytes);
      case Pass::kBackwardData:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            handle, w, y, conv, x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm), bytes);
      case Pass::kBackwardFilter:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            handle, x, y, conv, w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm), bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  /// The workspace `algorithm` of `pass` needs; nullopt when it is no algorithm of the pass or
  /// cuDNN does not run it on the shape (`status`, if given, says why).
  std::optional<std::size_t> workspace_or_status(Pass pass, int algorithm,
                                                 std::string* status) const {
    if (algorithm < 0 || algorithm >= algorithm_count(pass)) {
      if (status != nullptr) *status = "no such algorithm";
      return std::nullopt;
    }
    std::size_t bytes = 0;
    const cudnnStatus_t st = workspace(pass, algorithm, &bytes);
    if (st != CUDNN_STATUS_SUCCESS) {
      if (status != nullptr) *status = cudnnGetErrorString(st);
      return std::nullopt;
    }
    return bytes;
  }

  /// One run of `pass` with `algorithm` into `out` (overwritten: beta 0) from `a` and `b`:
  /// forward y from (x, w), backward data dx from (w, dy), backward filter dw from (x, dy).
  cudnnStatus_t launch(Pass pass, int algorithm, const void* a, const void* b, void* out,
                       void* ws, std::size_t ws_bytes) const {
    const float one = 1, zero = 0;
    switch (pass) {
      case Pass::kForward:
        return cudnnConvolutionForward(handle, &one, x, a, w, b, conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(algorithm), ws,
                                       ws_bytes, &zero, y, out);
      case Pass::kBackwardData:
        return cudnnConvolutionBackwardData(handle, &one, w, a, y, b, conv,
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm),
                                            ws, ws_bytes, &zero, x, out);
      case Pass::kBackwardFilter:
        return cudnnConvolutionBackwardFilter(
            handle, &one, x, a, y, b, conv,
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm), ws, ws_bytes, &zero, w, out);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }
};

}  // namespace

struct CudnnConv::State : Descriptors {
  State(const ConvShape& shape, Math math) : Descriptors(shape, math) {}
  DeviceBuffer x_buf, w_buf, y_buf, dy_buf, dx_buf, dw_buf;

  /// The pass's output buffer and its size in floats.
  std::pair<void*, std::int64_t> output(Pass pass, const ConvShape& s) const {
    switch (pass) {
      case Pass::kForward:
        return {y_buf.get(), s.output_elements()};
      case Pass::kBackwardData:
        return {dx_buf.get(), s.input_elements()};
      case Pass::kBackwardFilter:
        return {dw_buf.get(), s.weight_elements()};
    }
    return {nullptr, 0};
  }

  /// One run of `pass` with `algorithm` into the pass's output buffer (overwritten: beta 0).
  cudnnStatus_t launch(Pass pass, int algorithm, void* ws, std::size_t ws_bytes) const {
    switch (pass) {
      case Pass::kForward:
        return Descriptors::launch(pass, algorithm, x_buf.get(), w_buf.get(), y_buf.get(), ws,
                                   ws_bytes);
      case Pass::kBackwardData:
        return Descriptors::launch(pass, algorithm, w_buf.get(), dy_buf.get(), dx_buf.get(), ws,
                                   ws_bytes);
      case Pass::kBackwardFilter:
        return Descriptors::launch(pass, algorithm, x_buf.get(), dy_buf.get(), dw_buf.get(), ws,
                                   ws_bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  /// cuDNN's heuristic ranking and determinism of every algorithm it lists for `pass`.
  /// cuDNN's ranking of `pass`'s algorithms on this shape: an algorithm's first place in it, and
  /// whether cuDNN calls it deterministic. The list can hold an algorithm more than once (with
  /// and without tensor cores): it is asked for at its longest (...AlgorithmMaxCount).
  void heuristics(Pass pass, std::vector<int>* rank, std::vector<char>* deterministic) const {
    const int n = algorithm_count(pass);
    rank->assign(static_cast<std::size_t>(n), -1);
    deterministic->assign(static_cast<std::size_t>(n), 0);
    int returned = 0;
    const auto record = [&](const auto& perf) {
      for (int i = 0; i < returned; ++i) {
        const int a = static_cast<int>(perf[static_cast<std::size_t>(i)].algo);
        if (a < 0 || a >= n || (*rank)[static_cast<std::size_t>(a)] >= 0 ||
            perf[static_cast<std::size_t>(i)].status != CUDNN_STATUS_SUCCESS)
          continue;
        (*rank)[static_cast<std::size_t>(a)] = i;
        (*deterministic)[static_cast<std::size_t>(a)] =
            perf[static_cast<std::size_t>(i)].determinism == CUDNN_DETERMINISTIC;
      }
    };
    switch (pass) {
      case Pass::kForward: {
        int most = 0;
        check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &most),
              "cudnnGetConvolutionForwardAlgorithmMaxCount");
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(most));
        check(cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, most, &returned,
                                                     perf.data()),
              "cudnnGetConvolutionForwardAlgorithm_v7");
        record(perf);
        break;
      }
      case Pass::kBackwardData: {
        int most = 0;
        check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &most),
              "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<std::size_t>(most));
        check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, y, conv, x, most, &returned,
                                                          perf.data()),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
        record(perf);
        break;
      }
      case Pass::kBackwardFilter: {
        int most = 0;
        check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &most),
              "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<std::size_t>(most));
        check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, y, conv, w, most, &returned,
                                                            perf.data()),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
        record(perf);
        break;
      }
    }
  }
};

CudnnConv::CudnnConv(const ConvShape& shape, Math math)
    : shape_(shape), state_(std::make_unique<State>(shape, math)) {
  State& s = *state_;
  s.x_buf = DeviceBuffer(bytes_of(shape_.input_elements()));
  s.dx_buf = DeviceBuffer(bytes_of(shape_.input_elements()));
  s.w_buf = DeviceBuffer(bytes_of(shape_.weight_elements()));
  s.dw_buf = DeviceBuffer(bytes_of(shape_.weight_elements()));
  s.y_buf = DeviceBuffer(bytes_of(shape_.output_elements()));
  s.dy_buf = DeviceBuffer(bytes_of(shape_.output_elements()));
}

CudnnConv::~CudnnConv() = default;

void CudnnConv::upload(const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& dy) {
  const auto put = [](const DeviceBuffer& to, const std::vector<float>& from, std::int64_t n,
                      const char* what) {
    if (from.size() != static_cast<std::size_t>(n))
      throw std::invalid_argument(std::string("CudnnConv::upload: ") + what + " has " +
                                  std::to_string(from.size()) + " floats, the shape needs " +
                                  std::to_string(n));
    check(cudaMemcpy(to.get(), from.data(), bytes_of(n), cudaMemcpyHostToDevice), "upload");
  };
  put(state_->x_buf, x, shape_.input_elements(), "x");
  put(state_->w_buf, w, shape_.weight_elements(), "w");
  put(state_->dy_buf, dy, shape_.output_elements(), "dy");
}

std::optional<std::size_t> CudnnConv::workspace_bytes(Pass pass, int algorithm,
                                                      std::string* status) const {
  return state_->workspace_or_status(pass, algorithm, status);
}

std::vector<float> CudnnConv::run(Pass pass, int algorithm, std::size_t workspace_limit) {
  std::string status;
  const auto need = workspace_bytes(pass, algorithm, &status);
  const std::string what = std::string(pass_name(pass)) + " " + algorithm_name(pass, algorithm);
  if (!need) throw CudnnError(what + " on " + shape_.to_string() + ": " + status);
  if (*need > workspace_limit)
    throw WorkspaceExceeded(what + " needs " + std::to_string(*need) +
                            " bytes of workspace, the limit is " + std::to_string(workspace_limit));
  DeviceBuffer ws(*need);
  check(state_->launch(pass, algorithm, ws.get(), ws.bytes()), what.c_str());
  check(cudaDeviceSynchronize(), what.c_str());
  const auto [out, n] = state_->output(pass, shape_);
  std::vector<float> host(static_cast<std::size_t>(n));
  check(cudaMemcpy(host.data(), out, bytes_of(n), cudaMemcpyDeviceToHost), "download");
  return host;
}

std::vector<AlgorithmCost> CudnnConv::measure(Pass pass, int repeats, std::size_t max_workspace) {
  if (repeats < 1) throw std::invalid_argument("CudnnConv::measure: repeats must be positive");
  std::vector<int> rank;
  std::vector<char> deterministic;
  state_->heuristics(pass, &rank, &deterministic);
  std::vector<AlgorithmCost> costs;
  for (int a = 0; a < algorithm_count(pass); ++a) {
    AlgorithmCost c;
    c.pass = pass;
    c.algorithm = a;
    c.name = algorithm_name(pass, a);
    c.heuristic_rank = rank[static_cast<std::size_t>(a)];
    if (c.heuristic_rank >= 0) c.deterministic = deterministic[static_cast<std::size_t>(a)] != 0;
    const std::string what = std::string(pass_name(pass)) + " " + c.name;
    std::size_t need = 0;
    const cudnnStatus_t size_status = state_->workspace(pass, a, &need);
    if (size_status != CUDNN_STATUS_SUCCESS) {
      c.status = cudnnGetErrorString(size_status);
      c.failed = !not_supported(size_status);
      costs.push_back(std::move(c));
      continue;
    }
    c.workspace_bytes = need;
    if (need > max_workspace) {
      c.status = "workspace over the cap (" + std::to_string(need) + " bytes)";
      costs.push_back(std::move(c));
      continue;
    }
    DeviceBuffer ws;
    try {
      ws = DeviceBuffer(need);
    } catch (const DeviceOutOfMemory&) {  // not usable here, not a failure
      c.status = "workspace allocation failed (" + std::to_string(need) + " bytes)";
      costs.push_back(std::move(c));
      continue;
    }
    // A supported size can still be refused at launch (a configuration cuDNN rejects only then).
    const cudnnStatus_t st = state_->launch(pass, a, ws.get(), ws.bytes());
    if (st != CUDNN_STATUS_SUCCESS) {
      c.status = cudnnGetErrorString(st);
      c.failed = !not_supported(st) && !allocation_failed(st);  // a full device: not usable here
      costs.push_back(std::move(c));
      continue;
    }
    // A kernel's fault shows at the next synchronisation; name the algorithm that caused it (the
    // context is lost then, so nothing else can run).
    check(cudaDeviceSynchronize(), what.c_str());
    c.supported = true;
    c.status = "ok";
    try {
      c.ms = median_ms(repeats,
                       [&] { check(state_->launch(pass, a, ws.get(), ws.bytes()), what.c_str()); });
    } catch (const DeviceOutOfMemory&) {
      throw;  // what a caller that counts out-of-memory failures catches
    } catch (const CudnnError& e) {
      throw CudnnError(what + " while timed: " + e.what());
    }
    costs.push_back(std::move(c));
  }
  // Every result against the default's, on the same uploaded tensors.
  const AlgorithmCost* def = heuristic_default(costs);
  if (def == nullptr) def = fastest_within(costs, max_workspace);
  if (def != nullptr) {
    const std::vector<float> reference = run(pass, def->algorithm, def->workspace_bytes);
    double scale = 0;
    for (const float v : reference) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (AlgorithmCost& c : costs) {
      if (!c.supported || &c == def) continue;
      const std::vector<float> result = run(pass, c.algorithm, c.workspace_bytes);
      double diff = 0;
      for (std::size_t i = 0; i < result.size(); ++i)
        diff = std::max(diff, std::fabs(static_cast<double>(result[i]) - reference[i]));
      c.max_abs_diff = diff;
      c.max_rel_diff = scale > 0 ? diff / scale : diff;
    }
  }
  return costs;
}

struct CudnnConvRunner::State : Descriptors {
  State(const ConvShape& shape, Math math) : Descriptors(shape, math) {}
  std::mutex mutex;  // one thread at a time on the handle
};

CudnnConvRunner::CudnnConvRunner(const ConvShape& shape, Math math)
    : shape_(shape), state_(std::make_unique<State>(shape, math)) {}

CudnnConvRunner::~CudnnConvRunner() = default;

std::optional<std::size_t> CudnnConvRunner::workspace_bytes(Pass pass, int algorithm,
                                                            std::string* status) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->workspace_or_status(pass, algorithm, status);
}

void CudnnConvRunner::run(Pass pass, int algorithm, const float* a, const float* b, float* out,
                          void* workspace, std::size_t workspace_limit, void* stream) const {
  const std::string what = std::string(pass_name(pass)) + " " + algorithm_name(pass, algorithm) +
                           " on " + shape_.to_string();
  if (algorithm < 0 || algorithm >= algorithm_count(pass))
    throw CudnnError(what + ": no such algorithm");
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::size_t need = 0;
  const cudnnStatus_t st = state_->workspace(pass, algorithm, &need);
  if (st != CUDNN_STATUS_SUCCESS) throw CudnnError(what + ": " + cudnnGetErrorString(st));
  if (need > workspace_limit)
    throw WorkspaceExceeded(what + " needs " + std::to_string(need) +
                            " bytes of workspace, the limit is " +
                            std::to_string(workspace_limit));
  check(cudnnSetStream(state_->handle, static_cast<cudaStream_t>(stream)), "cudnnSetStream");
  check(state_->launch(pass, algorithm, a, b, out, workspace, need), what.c_str());
}

std::string algorithm_label(Pass pass, int algorithm) { return algorithm_name(pass, algorithm); }

}  // namespace engram::nn::cudnn
