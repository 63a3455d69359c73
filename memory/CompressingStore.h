#pragma once
/// \file
/// The ReLU-compression technique as an activation store (docs/ARCHITECTURE.md): ReLU outputs are
/// kept for backward as nonzero bitmap plus nonzero values (memory/ReluCompression.h), one
/// compressed copy serving the ReLU's backward and the backward of every layer that consumes the
/// same tensor; everything else is kept as PlainStore keeps it.
///
/// \code
///   engram::memory::CompressingStore store;
///   {
///     engram::nn::RuntimeGuard use(&store, nullptr);   // nn/Runtime.h
///     loss = model->forward(x);   // ReLU outputs compressed as they are saved
///   }                             // the dense ReLU outputs are already freed here
///   loss.backward();              // each one decompressed when its backward needs it
///   engram::memory::CompressionStats s = store.stats();
///   s.sparsity();  s.compression_ratio();
/// \endcode
///
/// How sharing works: save(t, SavedKind::relu_output) compresses t and remembers the handle under
/// t's identity: its storage, storage offset, sizes, strides, dtype and version. A later save of
/// the same tensor (kind relu_output or activation; a convolution, linear or batch-norm layer
/// saving its input) returns that same handle rather than keeping the dense tensor, so the dense
/// tensor is held by nobody but the forward pass and is freed as soon as forward drops it. A
/// tensor saved as an activation that no ReLU saved before (or a view of a ReLU output with other
/// sizes or strides) is kept as it is.
///
/// A shared handle counts its users: every save() that returned it is one, release() drops one,
/// and the compressed copy is freed with the last (or when every handle is destroyed, e.g. a graph
/// dropped without backward). The store remembers a handle only while it is alive (the registry
/// holds weak references and the handle erases itself), so nothing accumulates across steps. It
/// holds no reference to the dense tensor's memory: a weak reference to its storage object keeps
/// the storage's address from being reused, and the tensor's version counter is kept to detect an
/// in-place modification after save(): load() then throws std::logic_error, as PlainStore does.
///
/// load() decompresses into a fresh tensor. With `cache_decompressed`, a load() that leaves other
/// users to come keeps the decompressed tensor in place of the compressed buffers (which it frees)
/// until the last user releases the handle: the ReLU and its consumers then decompress once
/// between them, and the handle never holds more than the plain store would. Compression and
/// decompression are recorded as spans "compress" and "decompress" (category "memory") in the
/// memory tracker's open window.
///
/// Compressed: float32 CPU and CUDA tensors that are non-overlapping and dense (a CUDA tensor on
/// its device, by memory/cuda/'s kernels on the current stream: memory/ReluCompression.h). Other
/// ReLU outputs (double, strided views, empty) are kept as they are and counted in
/// stats().plain_relu_outputs. The store may be used from several threads.

#include "memory/ActivationStore.h"

#include <cstdint>
#include <memory>

namespace engram::memory {
namespace detail {
struct CompressionRegistry;
}  // namespace detail

/// What a CompressingStore did since it was made or since reset_stats().
struct CompressionStats {
  std::int64_t compressed_tensors = 0;  ///< ReLU outputs compressed
  std::int64_t plain_relu_outputs = 0;  ///< ReLU outputs kept as they are (see the file comment)
  std::int64_t shared_saves = 0;        ///< save() calls answered with an existing handle
  std::int64_t elements = 0;            ///< of the compressed tensors
  std::int64_t zeros = 0;               ///< elements that were +0.0
  std::int64_t dense_bytes = 0;         ///< 4 * elements
  std::int64_t compressed_bytes = 0;    ///< bitmap + block offsets + values
  std::int64_t bitmap_plus_values_bytes = 0;  ///< the ideal: sum of ceil(n / 8) + 4 * nonzeros
  std::int64_t decompressions = 0;
  /// Wall time in compress_relu() and decompress_relu(): the kernels' time on the CPU. On CUDA
  /// not theirs: compress_relu waits for its stream (whatever was queued before it counts too),
  /// decompress_relu only launches; only CPU benches report them.
  std::int64_t compress_ns = 0;
  std::int64_t decompress_ns = 0;

  /// zeros / elements (0 when nothing was compressed).
  double sparsity() const;
  /// dense_bytes / compressed_bytes (0 when nothing was compressed).
  double compression_ratio() const;
};

struct CompressingStoreOptions {
  /// Swap the compressed copy for the decompressed tensor at the first load() that leaves other
  /// users to come (see the file comment).
  bool cache_decompressed = false;
};

class CompressingStore : public ActivationStore {
 public:
  explicit CompressingStore(CompressingStoreOptions options = {});

  c10::intrusive_ptr<SavedTensor> save(const at::Tensor& tensor, SavedKind kind) override;
  const char* name() const override { return "relu"; }

  const CompressingStoreOptions& options() const { return options_; }
  CompressionStats stats() const;
  void reset_stats();
  /// Compressed tensors whose handles are alive and not fully released.
  std::int64_t live_handles() const;

 private:
  CompressingStoreOptions options_;
  /// Shared with the handles, which may outlive the store.
  std::shared_ptr<detail::CompressionRegistry> registry_;
  PlainStore plain_;
};

}  // namespace engram::memory
