#include "memory/DeviceArenaReuse.h"

#include "memory/detail/ReuseSequence.h"
#include "memory/detail/StreamUses.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::memory {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;

/// The arena's alignment: the caching allocator's block rounding (512 bytes), which also keeps
/// every block aligned for any CUDA kernel.
constexpr std::int64_t kAlignment = 512;

/// Everything the delegating allocator and DeviceArenaReuse share; one per process.
struct DeviceState {
  std::mutex mutex;  // guards everything below except `next` and `device`, set once
  cca::CUDAAllocator* next = nullptr;  // the caching allocator
  c10::DeviceIndex device = 0;
  detail::ReuseSequence sequence{kAlignment};
  char* arena = nullptr;
  bool release_requested = false;  // release() came while arena bytes were taken
  std::optional<c10::cuda::CUDAStream> stream;  // the open step's
  std::atomic<bool> active{false};              // a step is open (read unlocked)
  /// Arena blocks by offset: the stream each was served on, the other streams that used it, and
  /// the released ones those streams may still be using.
  detail::StreamUses<c10::cuda::CUDAStream, c10::cuda::CUDAEvent> uses;

  /// Gives back the arena's bytes whose other streams are done with them.
  void poll_pending() {
    uses.poll([this](std::int64_t offset) { sequence.vacate(offset); });
    free_arena_if_released();
  }

  /// Replaces the arena by one of the largest plan's size when none of its bytes are taken. A
  /// size the device refused (out of memory, or over --memory-cap) is not tried again until the
  /// plans want another: every refusal makes the caching allocator give back its whole cache.
  /// Refused, it keeps the arena it had if that still fits, else none: planned allocations
  /// beyond it are conflicts.
  void grow_if_idle() {
    poll_pending();
    if (release_requested || !stream.has_value()) return;
    sequence.grow([this] { free_arena(); },
                  [this](std::int64_t bytes) {
                    try {
                      arena = static_cast<char*>(next->raw_alloc_with_stream(
                          static_cast<std::size_t>(bytes), stream->stream()));
                    } catch (const c10::OutOfMemoryError&) {
                      arena = nullptr;
                    }
                    return arena != nullptr;
                  });
  }

  /// Gives the arena's bytes back to the caching allocator.
  void free_arena() {
    if (arena != nullptr) next->raw_delete(arena);
    arena = nullptr;
  }

  void free_arena_if_released() {
    if (release_requested && sequence.idle()) {
      free_arena();
      sequence.set_capacity(0);
      release_requested = false;
    }
  }

  /// The arena that holds `data`, or nullptr.
  const char* arena_holding(const void* data) {
    std::lock_guard<std::mutex> lock(mutex);
    return sequence.offset_in_arena(data, arena) >= 0 ? arena : nullptr;
  }

  /// A step block's release (deleter of every DataPtr a step got). Caller holds no lock.
  void release_block(void* ptr) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      const std::int64_t offset = sequence.released(ptr, arena);
      if (offset >= 0) {
        const bool free_now = uses.release(offset, [](const c10::cuda::CUDAStream& stream) {
          c10::cuda::CUDAEvent passed(cudaEventDisableTiming);
          passed.record(stream);
          return passed;
        });
        if (free_now) sequence.vacate(offset);
        free_arena_if_released();
        return;
      }
    }
    next->raw_delete(ptr);
  }
};

/// Tells the caching allocator that `stream` uses `block`, an allocation of its own held raw
/// (the arena, or a step's block it served): freed, the block goes to other work only after
/// that stream's work enqueued by then. It records a stream only on a DataPtr with its own
/// deleter, so one is lent for the call.
void record_use(cca::CUDAAllocator* next, void* block, c10::Device device,
                const c10::cuda::CUDAStream& stream) {
  c10::DataPtr own(block, block, next->raw_deleter(), device);
  try {
    next->recordStream(own, stream);
  } catch (...) {
    (void)own.release_context();  // the block stays its holder's to free
    throw;
  }
  (void)own.release_context();
}

DeviceState* g_state = nullptr;  // set once by install(), never freed
std::atomic<DeviceArenaReuse*> g_installed{nullptr};

void delete_step_block(void* ptr) {
  if (ptr != nullptr) g_state->release_block(ptr);
}

/// Whether a CUDA graph is capturing `stream`.
bool capturing(const c10::cuda::CUDAStream& stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream.stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

/// In front of the caching allocator: a step's allocations through the arena, everything else
/// handed on. Every DataPtr it returns during a step carries delete_step_block, which frees a
/// block of the caching allocator there too, so raw_deleter() is that for any pointer.
class FrontAllocator final : public cca::CUDAAllocator {
 public:
  explicit FrontAllocator(cca::CUDAAllocator* next) : next_(next) {}

  c10::DataPtr allocate(std::size_t n) override {
    DeviceState& s = *g_state;
    if (n == 0 || !s.active.load(std::memory_order_acquire) || detail::reuse_bypassed())
      return next_->allocate(n);
    const c10::DeviceIndex device = c10::cuda::current_device();
    if (device != s.device) return next_->allocate(n);
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device);
    std::unique_lock<std::mutex> lock(s.mutex);
    if (!s.sequence.open()) {
      lock.unlock();
      return next_->allocate(n);
    }
    if (stream != *s.stream || capturing(stream)) {
      // Another stream's, or one a CUDA graph captures (the caching allocator keeps those in
      // the graph's private pool).
      s.sequence.note_foreign();
      lock.unlock();
      return next_->allocate(n);
    }
    s.poll_pending();
    const auto at = s.sequence.allocate(static_cast<std::int64_t>(n));
    void* block = nullptr;
    if (at.offset >= 0) {
      block = s.arena + at.offset;
      s.uses.served(at.offset, stream);
    } else {
      block = next_->raw_alloc_with_stream(n, stream.stream());
    }
    s.sequence.bind(at.index, block);
    return {block, block, &delete_step_block, c10::Device(c10::kCUDA, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_step_block; }

  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    if (ptr.get() == nullptr) return;
    if (ptr.get_deleter() != &delete_step_block) {
      next_->recordStream(ptr, stream);
      return;
    }
    DeviceState& s = *g_state;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      const std::int64_t offset = s.sequence.offset_in_arena(ptr.get(), s.arena);
      if (offset >= 0) {
        s.uses.used(offset, stream);
        return;
      }
    }
    // A block of the caching allocator under the step's deleter.
    record_use(next_, ptr.get(), ptr.device(), stream);
  }

  void raw_delete(void* ptr) override { delete_step_block(ptr); }

  // Everything below is the caching allocator's.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    next_->copy_data(dest, src, count);
  }
  bool initialized() override { return next_->initialized(); }
  void emptyCache(c10::MempoolId_t id) override { next_->emptyCache(id); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    return next_->getDeviceStats(d);
  }
  void resetAccumulatedStats(c10::DeviceIndex d) override { next_->resetAccumulatedStats(d); }
  void resetPeakStats(c10::DeviceIndex d) override { next_->resetPeakStats(d); }
  std::pair<std::size_t, std::size_t> getMemoryInfo(c10::DeviceIndex d) override {
    return next_->getMemoryInfo(d);
  }
  void* raw_alloc(std::size_t n) override { return next_->raw_alloc(n); }
  void* raw_alloc_with_stream(std::size_t n, cudaStream_t stream) override {
    return next_->raw_alloc_with_stream(n, stream);
  }
  void init(int device_count) override { next_->init(device_count); }
  double getMemoryFraction(c10::DeviceIndex d) override { return next_->getMemoryFraction(d); }
  void setMemoryFraction(double fraction, c10::DeviceIndex d) override {
    next_->setMemoryFraction(fraction, d);
  }
  std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex d) override {
    return next_->getExpandableSegmentSizes(d);
  }
  void enable(bool value) override { next_->enable(value); }
  bool isEnabled() const override { return next_->isEnabled(); }
  void cacheInfo(c10::DeviceIndex d, std::size_t* largest) override {
    next_->cacheInfo(d, largest);
  }
  void* getBaseAllocation(void* ptr, std::size_t* size) override {
    // A block in the arena lies in the arena's segment (the caller takes its offset from the base).
    const char* arena = g_state->arena_holding(ptr);
    return next_->getBaseAllocation(arena != nullptr ? const_cast<char*>(arena) : ptr, size);
  }
  cca::SnapshotInfo snapshot(c10::MempoolId_t id, bool include_traces) override {
    return next_->snapshot(id, include_traces);
  }
  void beginAllocateToPool(c10::DeviceIndex d, c10::MempoolId_t id,
                           std::function<bool(cudaStream_t)> filter) override {
    next_->beginAllocateToPool(d, id, std::move(filter));
  }
  void endAllocateToPool(c10::DeviceIndex d, c10::MempoolId_t id) override {
    next_->endAllocateToPool(d, id);
  }
  void releasePool(c10::DeviceIndex d, c10::MempoolId_t id) override { next_->releasePool(d, id); }
  int getPoolUseCount(c10::DeviceIndex d, c10::MempoolId_t id) override {
    return next_->getPoolUseCount(d, id);
  }
  void createOrIncrefPool(c10::DeviceIndex d, c10::MempoolId_t id,
                          std::shared_ptr<cca::CUDAAllocator> allocator) override {
    next_->createOrIncrefPool(d, id, std::move(allocator));
  }
  void setUseOnOOM(c10::DeviceIndex d, c10::MempoolId_t id, bool use_on_oom) override {
    next_->setUseOnOOM(d, id, use_on_oom);
  }
  void setNoSplit(c10::DeviceIndex d, c10::MempoolId_t id) override { next_->setNoSplit(d, id); }
  bool checkPoolLiveAllocations(c10::DeviceIndex d, c10::MempoolId_t id,
                                const std::unordered_set<void*>& expected) override {
    return next_->checkPoolLiveAllocations(d, id, expected);
  }
  cca::ShareableHandle shareIpcHandle(void* ptr) override {
    const char* arena = g_state->arena_holding(ptr);
    if (arena == nullptr) return next_->shareIpcHandle(ptr);
    cca::ShareableHandle handle = next_->shareIpcHandle(const_cast<char*>(arena));
    handle.offset += static_cast<const char*>(ptr) - arena;
    return handle;
  }
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override {
    return next_->getIpcDevPtr(std::move(handle));
  }
  bool isHistoryEnabled() override { return next_->isHistoryEnabled(); }
  void recordHistory(bool enabled, cca::CreateContextFn context_recorder,
                     std::size_t alloc_trace_max_entries, cca::RecordContext when,
                     bool clear_history, const std::vector<std::string>& skip_actions) override {
    next_->recordHistory(enabled, std::move(context_recorder), alloc_trace_max_entries, when,
                         clear_history, skip_actions);
  }
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    next_->recordAnnotation(md);
  }
  void pushCompileContext(std::string& md) override { next_->pushCompileContext(md); }
  void popCompileContext() override { next_->popCompileContext(); }
  void setUserMetadata(const std::string& metadata) override { next_->setUserMetadata(metadata); }
  std::string getUserMetadata() override { return next_->getUserMetadata(); }
  void attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) override {
    next_->attachOutOfMemoryObserver(std::move(observer));
  }
  void attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) override {
    next_->attachAllocatorTraceTracker(std::move(tracker));
  }
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override {
    next_->enablePeerAccess(dev, dev_to_access);
  }
  cudaError_t memcpyAsync(void* dst, int dst_device, const void* src, int src_device,
                          std::size_t count, cudaStream_t stream, bool p2p_enabled) override {
    return next_->memcpyAsync(dst, dst_device, src, src_device, count, stream, p2p_enabled);
  }
  std::shared_ptr<cca::AllocatorState> getCheckpointState(c10::DeviceIndex d,
                                                          c10::MempoolId_t id) override {
    return next_->getCheckpointState(d, id);
  }
  cca::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex d,
                                              std::shared_ptr<cca::AllocatorState> pps) override {
    return next_->setCheckpointPoolState(d, std::move(pps));
  }
  std::string name() override { return next_->name(); }

 private:
  cca::CUDAAllocator* next_;
};

}  // namespace

DeviceArenaReuse::DeviceArenaReuse(int device) : device_(device) {}

DeviceArenaReuse& DeviceArenaReuse::install(int device) {
  const int count = c10::cuda::device_count();
  if (count == 0)
    throw std::runtime_error("fixed-structure reuse on a GPU: no CUDA device is visible");
  if (device < 0 || device >= count) {
    throw std::invalid_argument("fixed-structure reuse on a GPU: device " +
                                std::to_string(device) + " of " + std::to_string(count));
  }
  // The front relies on the native caching allocator: its raw_alloc_with_stream caches, and
  // its recordStream holds a block for another stream.
  const char* uncached = std::getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
  if (installed() == nullptr && (cca::get()->name() != "native" ||
                                 (uncached != nullptr && std::string(uncached) != "0"))) {
    throw std::runtime_error(
        "fixed-structure reuse on a GPU needs LibTorch's native caching allocator, and this "
        "process has " +
        (uncached != nullptr ? std::string("PYTORCH_NO_CUDA_MEMORY_CACHING set")
                             : "the " + cca::get()->name() + " allocator") +
        " (PYTORCH_CUDA_ALLOC_CONF backend)");
  }
  static DeviceArenaReuse* const reuse = [device] {
    auto* state = new DeviceState();  // never freed: blocks it served may be released any time
    state->next = cca::get();
    state->device = static_cast<c10::DeviceIndex>(device);
    g_state = state;
    auto* front = new FrontAllocator(state->next);  // never freed, as the caching allocator
    // Where ATen's CUDA tensors and c10::GetAllocator(kCUDA) take their memory from, as
    // torch.cuda.memory.change_current_allocator sets them; allocations of the caching
    // allocator made before keep its deleter, so they never pass through the front.
    c10::SetAllocator(c10::DeviceType::CUDA, front, /*priority=*/255);
    cca::allocator.store(front);
    auto* created = new DeviceArenaReuse(device);
    g_installed.store(created);
    return created;
  }();
  if (reuse->device_ != device) {
    throw std::invalid_argument("fixed-structure reuse on a GPU serves device " +
                                std::to_string(reuse->device_) + " in this process, not " +
                                std::to_string(device));
  }
  return *reuse;
}

DeviceArenaReuse* DeviceArenaReuse::installed() { return g_installed.load(); }

void DeviceArenaReuse::begin_step(std::uint64_t signature) {
  DeviceState& s = *g_state;
  const c10::cuda::CUDAGuard on_device(s.device);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.sequence.open())
    throw std::logic_error("fixed-structure reuse: begin_step() while a step is open");
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(s.device);
  if (s.stream.has_value() && *s.stream != stream) {
    // Bytes the last stream released are served on this one: after that stream's work.
    c10::cuda::CUDAEvent last(cudaEventDisableTiming);
    last.record(*s.stream);
    last.block(stream);
    // The arena is the caching allocator's block of the stream it was grown on: freed, it
    // would go at once to that stream's next allocation, with this one's kernels still on it.
    if (s.arena != nullptr) record_use(s.next, s.arena, c10::Device(c10::kCUDA, s.device), stream);
  }
  s.stream = stream;
  s.grow_if_idle();
  s.sequence.begin(signature);
  s.active.store(true, std::memory_order_release);
}

ReuseStep DeviceArenaReuse::end_step() {
  DeviceState& s = *g_state;
  const c10::cuda::CUDAGuard on_device(s.device);
  std::lock_guard<std::mutex> lock(s.mutex);
  ReuseStep step = s.sequence.end();
  s.active.store(false, std::memory_order_release);
  s.grow_if_idle();
  return step;
}

void DeviceArenaReuse::release() {
  DeviceState& s = *g_state;
  const c10::cuda::CUDAGuard on_device(s.device);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.sequence.open())
    throw std::logic_error("fixed-structure reuse: release() while a step is open");
  s.sequence.forget_plans();
  s.release_requested = true;
  s.poll_pending();
}

long DeviceArenaReuse::plans() const {
  std::lock_guard<std::mutex> lock(g_state->mutex);
  return g_state->sequence.plans();
}

std::int64_t DeviceArenaReuse::capacity_bytes() const {
  std::lock_guard<std::mutex> lock(g_state->mutex);
  return g_state->sequence.capacity();
}

bool DeviceArenaReuse::in_arena(const void* data) const {
  return g_state->arena_holding(data) != nullptr;
}

}  // namespace engram::memory
