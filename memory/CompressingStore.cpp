#include "memory/CompressingStore.h"

#include "memory/ArenaReuse.h"

#include "memory/MemoryTracker.h"
#include "memory/ReluCompression.h"
#include "memory/detail/TensorIdentity.h"

#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace engram::memory {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using detail::identity_of;
using detail::IdentityHash;
using detail::TensorIdentity;
using detail::version_counter;

bool compressible(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat && (t.device().is_cpu() || t.device().is_cuda()) &&
         t.layout() == at::kStrided &&
         t.is_non_overlapping_and_dense();
}

class CompressedSavedTensor;

}  // namespace

namespace detail {

struct CompressionRegistry {
  std::mutex mutex;  // guards `handles`
  std::unordered_map<TensorIdentity, c10::weak_intrusive_ptr<CompressedSavedTensor>, IdentityHash>
      handles;
  bool cache_decompressed = false;
  // Statistics, atomic so that handles update them without the mutex.
  std::atomic<std::int64_t> compressed_tensors{0}, plain_relu_outputs{0}, shared_saves{0},
      elements{0}, zeros{0}, dense_bytes{0}, compressed_bytes{0}, bitmap_plus_values_bytes{0},
      decompressions{0}, compress_ns{0}, decompress_ns{0};
};

}  // namespace detail

namespace {

using detail::CompressionRegistry;

/// One compressed ReLU output, shared by every save() of the same tensor. Locks: a handle's
/// mutex may be taken with the registry's held, never the other way round.
class CompressedSavedTensor final : public SavedTensor {
 public:
  CompressedSavedTensor(std::shared_ptr<CompressionRegistry> registry, TensorIdentity identity,
                        const at::Tensor& dense, CompressedRelu data)
      : registry_(std::move(registry)),
        identity_(std::move(identity)),
        storage_(dense.storage().getWeakStorageImpl()),
        version_counter_(version_counter(dense)),
        data_(std::move(data)) {}

  ~CompressedSavedTensor() override { unregister(); }

  at::Tensor load() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (users_ == 0) throw std::logic_error("saved tensor loaded after release()");
    if (version_counter_.enabled() && version_counter_.current_version() != identity_.version) {
      throw std::logic_error(
          "a tensor saved for backward was modified in place after it was saved (version " +
          std::to_string(identity_.version) + ", now " +
          std::to_string(version_counter_.current_version()) + ")");
    }
    if (cache_.defined()) return cache_;
    at::Tensor dense;
    {
      SpanGuard span("decompress", "memory");
      const std::int64_t start = steady_ns();
      dense = decompress_relu(data_);
      registry_->decompress_ns += steady_ns() - start;
      ++registry_->decompressions;
    }
    if (registry_->cache_decompressed && users_ > 1) {
      // Later users get this tensor; the handle never holds both forms.
      cache_ = dense;
      data_.reset();
    }
    return dense;
  }

  void release() override {
    CompressedRelu freed;
    at::Tensor cache;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (users_ == 0) return;
      if (--users_ > 0) return;
      freed = std::move(data_);
      cache = std::move(cache_);
      data_.reset();
      cache_.reset();
    }
    unregister();
  }

  std::int64_t stored_bytes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (users_ == 0) return 0;
    return data_.nbytes() + (cache_.defined() ? static_cast<std::int64_t>(cache_.nbytes()) : 0);
  }

  std::vector<at::Tensor> take_buffers() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (users_ == 0) return {};
    if (cache_.defined()) return {std::move(cache_)};
    if (!data_.bitmap.defined()) return {};
    return {std::move(data_.bitmap), std::move(data_.offsets), std::move(data_.values)};
  }

  void put_buffers(std::vector<at::Tensor> buffers) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (buffers.size() == 1) {
      cache_ = std::move(buffers[0]);
    } else if (buffers.size() == 3) {
      data_.bitmap = std::move(buffers[0]);
      data_.offsets = std::move(buffers[1]);
      data_.values = std::move(buffers[2]);
    } else {
      throw std::logic_error("CompressingStore: one or three buffers expected back");
    }
  }

  /// Counts one more user unless every user has released it already.
  bool try_add_user() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (users_ == 0) return false;
    ++users_;
    return true;
  }

  void mark_registered() { registered_.store(true); }

  const TensorIdentity& identity() const { return identity_; }

  // Called when the last strong reference goes while the registry still holds a weak one.
  void release_resources() override { unregister(); }

 private:
  /// Erases the registry's entry if it is this handle's; only the first call does anything.
  void unregister() {
    if (!registered_.exchange(false)) return;
    std::lock_guard<std::mutex> lock(registry_->mutex);
    detail::erase_entry_of(registry_->handles, identity_, this);
  }

  std::shared_ptr<CompressionRegistry> registry_;
  const TensorIdentity identity_;
  // Keeps the storage object (not its memory) so its address is not reused while `identity_`
  // names it.
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_;
  c10::VariableVersion version_counter_;
  std::atomic<bool> registered_{false};
  mutable std::mutex mutex_;  // guards what follows
  int users_ = 1;
  CompressedRelu data_;
  at::Tensor cache_;
};

}  // namespace

double CompressionStats::sparsity() const {
  return elements > 0 ? static_cast<double>(zeros) / static_cast<double>(elements) : 0.0;
}

double CompressionStats::compression_ratio() const {
  return compressed_bytes > 0
             ? static_cast<double>(dense_bytes) / static_cast<double>(compressed_bytes)
             : 0.0;
}

CompressingStore::CompressingStore(CompressingStoreOptions options)
    : options_(options), registry_(std::make_shared<detail::CompressionRegistry>()) {
  registry_->cache_decompressed = options_.cache_decompressed;
}

c10::intrusive_ptr<SavedTensor> CompressingStore::save(const at::Tensor& tensor, SavedKind kind) {
  const bool relu = kind == SavedKind::relu_output;
  if ((!relu && kind != SavedKind::activation) || !tensor.defined() || !tensor.has_storage() ||
      tensor.numel() == 0) {
    if (relu) ++registry_->plain_relu_outputs;
    return plain_.save(tensor, kind);
  }
  TensorIdentity identity = identity_of(tensor);
  c10::intrusive_ptr<CompressedSavedTensor> found;  // released after the registry's lock
  {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    const auto it = registry_->handles.find(identity);
    if (it != registry_->handles.end()) {
      found = it->second.lock();
      if (found && found->try_add_user()) {
        ++registry_->shared_saves;
        return found;
      }
    }
  }
  if (!relu) return plain_.save(tensor, kind);
  if (!compressible(tensor)) {
    ++registry_->plain_relu_outputs;
    return plain_.save(tensor, kind);
  }

  CompressedRelu data;
  {
    SpanGuard span("compress", "memory");
    ReuseBypass bypass;  // the compressed size depends on the data: no part of a fixed plan
    const std::int64_t start = steady_ns();
    data = compress_relu(tensor);
    registry_->compress_ns += steady_ns() - start;
  }
  auto& r = *registry_;
  ++r.compressed_tensors;
  r.elements += data.numel;
  r.zeros += data.zeros();
  r.dense_bytes += data.dense_bytes();
  r.compressed_bytes += data.nbytes();
  r.bitmap_plus_values_bytes += data.bitmap_plus_values_bytes();

  auto handle = c10::make_intrusive<CompressedSavedTensor>(registry_, std::move(identity), tensor,
                                                           std::move(data));
  {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    // Replaces a stale entry (a handle being released right now), if any.
    registry_->handles.insert_or_assign(handle->identity(),
                                        c10::weak_intrusive_ptr<CompressedSavedTensor>(handle));
    handle->mark_registered();
  }
  return handle;
}

CompressionStats CompressingStore::stats() const {
  const auto& r = *registry_;
  CompressionStats s;
  s.compressed_tensors = r.compressed_tensors;
  s.plain_relu_outputs = r.plain_relu_outputs;
  s.shared_saves = r.shared_saves;
  s.elements = r.elements;
  s.zeros = r.zeros;
  s.dense_bytes = r.dense_bytes;
  s.compressed_bytes = r.compressed_bytes;
  s.bitmap_plus_values_bytes = r.bitmap_plus_values_bytes;
  s.decompressions = r.decompressions;
  s.compress_ns = r.compress_ns;
  s.decompress_ns = r.decompress_ns;
  return s;
}

void CompressingStore::reset_stats() {
  auto& r = *registry_;
  for (auto* counter : {&r.compressed_tensors, &r.plain_relu_outputs, &r.shared_saves, &r.elements,
                        &r.zeros, &r.dense_bytes, &r.compressed_bytes, &r.bitmap_plus_values_bytes,
                        &r.decompressions, &r.compress_ns, &r.decompress_ns}) {
    counter->store(0);
  }
}

std::int64_t CompressingStore::live_handles() const {
  std::lock_guard<std::mutex> lock(registry_->mutex);
  return static_cast<std::int64_t>(registry_->handles.size());
}

}  // namespace engram::memory
