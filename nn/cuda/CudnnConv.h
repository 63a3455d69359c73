#pragma once
/// \file
/// cuDNN's convolution algorithms for one layer of nn::Conv2d's shape, each measured with its
/// workspace (lower-memory algorithm replacement on a GPU: the CPU side is nn/Algorithms.h). On
/// raw device buffers, no torch, like memory/cuda/; built in every build (with the torch wheel's
/// cuDNN), tested and benchmarked on its own
/// (tests/nn/CudnnConvTest.cpp, bench/CudnnConvBench.cpp).
///
/// \code
///   namespace cc = engram::nn::cudnn;
///   cc::ConvShape shape{/*batch=*/32, /*in=*/64, /*h=*/32, /*w=*/32, /*out=*/64, /*k=*/3,
///                       /*stride=*/1, /*padding=*/1};
///   cc::CudnnConv conv(shape);                           // descriptors and device buffers
///   conv.upload(x, w, dy);                               // host floats: input, weight, dy
///   auto costs = conv.measure(cc::Pass::kBackwardFilter, /*repeats=*/5);
///   const cc::AlgorithmCost* pick = cc::fastest_within(costs, /*limit=*/1 << 20);
///   std::vector<float> dw = conv.run(cc::Pass::kBackwardFilter, pick->algorithm, 1 << 20);
/// \endcode
///
/// A pass is one of the three convolutions of a training step: forward (y from x and w),
/// backward data (dx from dy and w) and backward filter (dw from x and dy). Each pass has its own
/// algorithms (cuDNN's CUDNN_CONVOLUTION_FWD_ALGO_*, _BWD_DATA_ALGO_*, _BWD_FILTER_ALGO_*), each
/// with the workspace cuDNN asks for on the shape. The math is float32 with FMA only
/// (CUDNN_FMA_MATH: no TF32) unless Math::kTf32 is asked for, so every algorithm computes the
/// same sums up to their order, and for FFT and Winograd up to their transforms' rounding.
/// CudnnConv runs on the legacy default stream (the stream PyTorch uses unless told otherwise),
/// and synchronously: results come back to the host.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::nn::cudnn {

/// A float32 NCHW convolution as nn::Conv2d runs it: input [batch, in_channels, height, width],
/// weight [out_channels, in_channels, kernel, kernel], square stride and zero padding, no
/// groups, no dilation, no bias (a bias is a separate addition).
struct ConvShape {
  std::int64_t batch = 1, in_channels = 1, height = 1, width = 1;
  std::int64_t out_channels = 1, kernel = 1, stride = 1, padding = 0;

  std::int64_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  std::int64_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
  std::int64_t input_elements() const { return batch * in_channels * height * width; }
  std::int64_t weight_elements() const { return out_channels * in_channels * kernel * kernel; }
  std::int64_t output_elements() const { return batch * out_channels * out_height() * out_width(); }
  /// Throws std::invalid_argument when a size is not positive, the kernel does not fit, or a
  /// tensor has more elements than cuDNN's 4-d descriptors hold (kMaxDescriptorElements).
  void check() const;
  /// cuDNN's limit on the elements of a tensor its 4-d descriptors describe (2^31 - 1). ATen
  /// splits a larger batch into parts under it; the cuDNN path of nn::Conv2d does not.
  static constexpr std::int64_t kMaxDescriptorElements = 0x7fffffff;
  /// "32x64x32x32 -> 64, k3 s1 p1".
  std::string to_string() const;
};

enum class Pass { kForward, kBackwardData, kBackwardFilter };
/// "forward", "backward_data", "backward_filter".
const char* pass_name(Pass pass);
/// The pass of that name; throws std::invalid_argument for another.
Pass parse_pass(const std::string& name);
/// Every pass, forward first.
std::vector<Pass> all_passes();

/// A failure of CUDA or cuDNN (no device, out of device memory, an unsupported configuration),
/// with the call and cuDNN's or CUDA's message.
class CudnnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// CUDA or cuDNN could not allocate (cudaErrorMemoryAllocation, cuDNN's ..._ALLOCATION_FAILED):
/// what a caller that counts out-of-memory failures, as a batch-size search does, catches.
class DeviceOutOfMemory : public CudnnError {
 public:
  using CudnnError::CudnnError;
};

/// CudnnError for a failed CUDA runtime call (`cuda_error` a cudaError_t, not cudaSuccess),
/// DeviceOutOfMemory for cudaErrorMemoryAllocation; the message names `what` and CUDA's words.
[[noreturn]] void throw_cuda_error(int cuda_error, const char* what);
/// The same for a cuDNN status (a cudnnStatus_t, not CUDNN_STATUS_SUCCESS): DeviceOutOfMemory
/// for its host and device allocation failures.
[[noreturn]] void throw_cudnn_error(int cudnn_status, const char* what);

/// The arithmetic of float32 convolutions: FMA only (CUDNN_FMA_MATH), or TF32 tensor cores
/// allowed where the device has them (CUDNN_DEFAULT_MATH), as PyTorch runs cuDNN's float32
/// convolutions while torch.backends.cudnn.allow_tf32 holds.
enum class Math { kFma, kTf32 };

/// run() with a limit below the workspace the algorithm needs. Nothing ran.
class WorkspaceExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One algorithm of one pass, measured on the layer's shape.
struct AlgorithmCost {
  Pass pass = Pass::kForward;
  int algorithm = 0;  ///< cuDNN's enum value for the pass
  std::string name;   ///< its name without the prefix: "IMPLICIT_PRECOMP_GEMM", "ALGO_1", "FFT"
  /// False when cuDNN does not run it on this shape, or it failed (`status` says why); then
  /// nothing below is measured.
  bool supported = false;
  /// cuDNN failed on it with something else than "not supported" or a failed allocation (a bug
  /// or a broken install, never expected): its status is the error.
  bool failed = false;
  std::string status;
  std::size_t workspace_bytes = 0;
  /// Median of the timed runs, milliseconds (CUDA events).
  double ms = 0;
  /// cuDNN's own word, from its heuristics: the same input gives the same bits on every run;
  /// unknown for an algorithm the heuristics did not rank.
  std::optional<bool> deterministic;
  /// Position in cuDNN's heuristic ranking (cudnnGetConvolution*Algorithm_v7), 0 first; -1 when
  /// the heuristics did not list it. The first supported one is what PyTorch runs when
  /// torch.backends.cudnn.benchmark is off: the layer's default here.
  int heuristic_rank = -1;
  /// Largest absolute difference of its result from the default algorithm's on the same data,
  /// and the same over the largest absolute value of the default's result.
  double max_abs_diff = 0, max_rel_diff = 0;
};

/// The fastest supported algorithm whose workspace is at most `limit` bytes (the first of equal
/// times); nullptr when none is. Pure: the per-layer choice of the planner.
const AlgorithmCost* fastest_within(const std::vector<AlgorithmCost>& costs, std::size_t limit);
/// The supported algorithm with the least workspace, the fastest of equal ones; nullptr when none
/// is. Pure: the planner's lower-memory choice.
const AlgorithmCost* least_workspace(const std::vector<AlgorithmCost>& costs);
/// The costs of the algorithms cuDNN's heuristics call deterministic (unranked ones, whose
/// determinism is unknown, left out): what a deterministic run may choose from.
std::vector<AlgorithmCost> deterministic_only(const std::vector<AlgorithmCost>& costs);
/// The default: the supported algorithm with the best heuristic rank; nullptr when none is.
const AlgorithmCost* heuristic_default(const std::vector<AlgorithmCost>& costs);

/// Whether a CUDA device can be used here; when not, `why` (if given) says why.
bool device_available(std::string* why = nullptr);
/// The version of the cuDNN library loaded (cudnnGetVersion(): 91900 for 9.19.0).
std::size_t cudnn_version();

/// cuDNN's name of `algorithm` of `pass` without its prefix ("IMPLICIT_PRECOMP_GEMM", "ALGO_1"),
/// or "algorithm N" for a number cuDNN does not have.
std::string algorithm_label(Pass pass, int algorithm);

/// A shape's cuDNN handle and descriptors, run on the caller's device buffers on the caller's
/// stream with the caller's workspace: what nn::Conv2d runs on CUDA with the algorithms the
/// planner chose (nn/Conv2d.h). The same descriptors as CudnnConv (float32 NCHW) with the math
/// given. One run at a time (a mutex guards the handle).
class CudnnConvRunner {
 public:
  /// Throws std::invalid_argument for a bad shape, CudnnError without a device or cuDNN.
  explicit CudnnConvRunner(const ConvShape& shape, Math math = Math::kFma);
  ~CudnnConvRunner();
  CudnnConvRunner(const CudnnConvRunner&) = delete;
  CudnnConvRunner& operator=(const CudnnConvRunner&) = delete;

  const ConvShape& shape() const { return shape_; }
  /// As CudnnConv::workspace_bytes.
  std::optional<std::size_t> workspace_bytes(Pass pass, int algorithm,
                                             std::string* status = nullptr) const;
  /// Queues `pass` with `algorithm` on `stream` (a cudaStream_t) into `out` (overwritten) from
  /// `a` and `b`: forward y from (x, w), backward data dx from (w, dy), backward filter dw from
  /// (x, dy); every pointer on the device, dense NCHW float32 of the shape. `workspace` holds
  /// `workspace_limit` bytes. Throws WorkspaceExceeded when the algorithm needs more, CudnnError
  /// when cuDNN does not run it on this shape or fails; never runs another algorithm.
  void run(Pass pass, int algorithm, const float* a, const float* b, float* out,
           void* workspace, std::size_t workspace_limit, void* stream) const;

 private:
  struct State;
  ConvShape shape_;
  std::unique_ptr<State> state_;
};

/// One layer on the current CUDA device: a cuDNN handle, the descriptors of its shape, and device
/// buffers for x, w, y, dy, dx and dw (not for the workspace, which is allocated per run at the
/// algorithm's size). Not copyable; one thread at a time.
class CudnnConv {
 public:
  /// Throws std::invalid_argument for a bad shape, CudnnError without a device or cuDNN.
  explicit CudnnConv(const ConvShape& shape, Math math = Math::kFma);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  const ConvShape& shape() const { return shape_; }
  /// Copies the host tensors in (shape().input_elements(), weight_elements() and
  /// output_elements() floats); throws std::invalid_argument for other sizes.
  void upload(const std::vector<float>& x, const std::vector<float>& w,
              const std::vector<float>& dy);

  /// The workspace `algorithm` needs for `pass` on this shape; nullopt when cuDNN does not run it
  /// here (`status`, if given, says why).
  std::optional<std::size_t> workspace_bytes(Pass pass, int algorithm,
                                             std::string* status = nullptr) const;
  /// Runs `pass` with `algorithm` on the uploaded tensors and returns its result (y, dx or dw).
  /// Throws WorkspaceExceeded when the algorithm needs more than `workspace_limit` bytes,
  /// CudnnError when cuDNN does not run it or fails; never runs another algorithm.
  std::vector<float> run(Pass pass, int algorithm, std::size_t workspace_limit);
  /// Every algorithm of `pass`: supported or not, workspace, cuDNN's determinism and heuristic
  /// rank; then, for the supported ones, one warm-up and the median of `repeats` (at least 1)
  /// timed runs, and the largest difference of each one's result from the default's.
  /// Algorithms that need more than `max_workspace` bytes, or whose workspace cannot be
  /// allocated, are listed as unsupported; a status other than cuDNN's "not supported" marks one
  /// `failed`. Throws CudnnError when a kernel faults (the device context is lost then).
  std::vector<AlgorithmCost> measure(Pass pass, int repeats,
                                     std::size_t max_workspace = std::size_t{4} << 30);

 private:
  struct State;
  ConvShape shape_;
  std::unique_ptr<State> state_;
};

}  // namespace engram::nn::cudnn
