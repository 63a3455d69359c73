#include "memory/SwapStore.h"

#include "common/FileChecks.h"
#include "memory/MemoryTracker.h"
#include "memory/PinnedCopy.h"
#include "memory/detail/TensorIdentity.h"

#include <ATen/ops/empty_strided.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

namespace engram::memory {
namespace {

using detail::identity_of;
using detail::IdentityHash;
using detail::TensorIdentity;
using Clock = std::chrono::steady_clock;

std::int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

/// Where a handle's data is.
enum class Where : std::uint8_t { resident, queued_out, writing, out, queued_in, reading, failed };

/// One buffer's place in the spill file, or its pinned host copy (a CUDA buffer), and how to
/// make it again.
struct Region {
  std::int64_t offset = 0, bytes = 0;
  std::vector<std::int64_t> sizes, strides;
  at::ScalarType dtype = at::kFloat;
  at::Tensor host;  ///< a CUDA buffer's bytes in pinned host memory (memory/PinnedCopy.h)
};

class SwapHandle;

}  // namespace

namespace detail {

struct SwapState {
  int fd = -1;
  double bandwidth = 0;                        // bytes per second; 0: unthrottled
  std::int64_t fail_after_bytes = -1;          // fault injection (SwapStoreOptions)
  std::atomic<int> refuse_reads{0};            // fault injection (SwapStoreOptions)
  mutable std::atomic<std::int64_t> moved{0};  // bytes through the file, for fail_after_bytes

  std::mutex mutex;  // guards everything below but the atomics
  std::condition_variable changed;
  struct Job {
    c10::intrusive_ptr<SwapHandle> handle;
    bool out = true;
  };
  std::deque<Job> queue;
  bool stop = false;
  bool io_running = false;
  bool busy = false;                // the I/O thread is working on a job
  std::int64_t file_end = 0;        // where the next region goes
  std::int64_t regions_in_use = 0;  // handles whose data the file holds (writing, out, reading)
  std::int64_t bytes_out = 0;
  std::unordered_map<TensorIdentity, c10::weak_intrusive_ptr<SwapHandle>, IdentityHash> registry;
  // The step being run (see SwapStore::begin_unit).
  bool forward_open = false;
  int current_unit = -1;
  std::vector<bool> unit_swapped;
  std::vector<c10::intrusive_ptr<SwapHandle>> pending;                   // saved, not yet decided
  std::vector<std::vector<c10::intrusive_ptr<SwapHandle>>> out_by_unit;  // by last saving unit
  std::vector<std::vector<int>> prefetch_at;
  bool synchronous = false;
  // A prefetch ran out of device memory in this step: the step's other swapped tensors are
  // read on demand (each refusal has the caching allocator empty its cache first).
  bool prefetch_paused = false;
  bool eager = false;  // the current unit's saves are written at once (see SwapStore::save)
  std::vector<c10::intrusive_ptr<SwapHandle>> unit_writes;  // written eagerly in this unit

  std::atomic<std::int64_t> swapped_out_tensors{0}, swapped_out_bytes{0}, swapped_in_bytes{0},
      prefetched{0}, on_demand{0}, prefetches_refused{0}, stall_ns{0}, swap_out_ns{0},
      swap_in_ns{0}, copy_out_ns{0}, copy_in_ns{0};
  mutable std::atomic<std::int64_t> resident_after_write{0};  // set by the const transfer()

  std::thread io;

  std::mutex copier_mutex;               // guards copier and copier_device
  std::unique_ptr<PinnedCopier> copier;  // made on the first CUDA buffer
  c10::Device copier_device{c10::kCPU};

  /// The copier of `device`'s buffers (one device per store: std::runtime_error for another).
  PinnedCopier& copier_for(const c10::Device& device) {
    std::lock_guard<std::mutex> lock(copier_mutex);
    if (!copier) {
      copier = std::make_unique<PinnedCopier>(device);
      copier_device = device;
    } else if (copier_device != device) {
      throw std::runtime_error("swap: buffers of " + device.str() + " after buffers of " +
                               copier_device.str() + " (one device per store)");
    }
    return *copier;
  }

  ~SwapState() {
    if (fd >= 0) ::close(fd);
  }

  /// Bytes of [offset, offset + bytes) of the spill file in the page cache (mincore); -1 when
  /// the kernel cannot tell.
  std::int64_t resident_bytes(std::int64_t offset, std::int64_t bytes) const {
    if (bytes <= 0) return 0;
    const std::int64_t page = ::sysconf(_SC_PAGESIZE);
    const std::int64_t first = offset / page * page;
    const std::int64_t length = offset + bytes - first;
    void* map = ::mmap(nullptr, static_cast<std::size_t>(length), PROT_READ, MAP_SHARED, fd,
                       static_cast<off_t>(first));
    if (map == MAP_FAILED) return -1;
    std::vector<unsigned char> in_core(static_cast<std::size_t>((length + page - 1) / page));
    std::int64_t resident = -1;
    if (::mincore(map, static_cast<std::size_t>(length), in_core.data()) == 0) {
      resident = 0;
      for (unsigned char c : in_core) resident += (c & 1) != 0 ? page : 0;
    }
    ::munmap(map, static_cast<std::size_t>(length));
    return resident;
  }

  /// Moves `bytes` between memory and the file at `offset`, throttled to `bandwidth`.
  void transfer(bool write, char* data, std::int64_t offset, std::int64_t bytes) const {
    constexpr std::int64_t kChunk = std::int64_t{1} << 20;
    const auto start = Clock::now();
    for (std::int64_t done = 0; done < bytes;) {
      const auto n = static_cast<std::size_t>(std::min(kChunk, bytes - done));
      const bool injected = fail_after_bytes >= 0 && moved.load() >= fail_after_bytes;
      if (injected) errno = EIO;
      const ssize_t r = injected ? -1
                        : write  ? ::pwrite(fd, data + done, n, offset + done)
                                 : ::pread(fd, data + done, n, offset + done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        throw std::runtime_error(std::string("swap: spill file ") + (write ? "write" : "read") +
                                 " failed: " + (r < 0 ? std::strerror(errno) : "end of file"));
      }
      done += r;
      moved += r;
      if (bandwidth > 0) {
        std::this_thread::sleep_until(
            start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(static_cast<double>(done) / bandwidth)));
      }
    }
    // The bytes leave memory: written back now and dropped from the page cache, or the spill
    // file would keep in RAM what swapping was to free (read back: the copy is in the tensor).
    if (write &&
        ::sync_file_range(fd, offset, bytes,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER) != 0 &&
        errno != ESPIPE && errno != EINVAL) {
      throw std::runtime_error(std::string("swap: spill file write-back failed: ") +
                               std::strerror(errno));
    }
    ::posix_fadvise(fd, offset, bytes, POSIX_FADV_DONTNEED);  // advice: nothing to check
    if (write) {
      const std::int64_t resident = resident_bytes(offset, bytes);
      std::int64_t seen = resident_after_write.load();
      while (resident > seen && !resident_after_write.compare_exchange_weak(seen, resident)) {
      }
    }
  }
};

}  // namespace detail

namespace {

using detail::SwapState;

/// A saved tensor of the swap store: the inner store's handle, and where its data is.
class SwapHandle final : public SavedTensor {
 public:
  SwapHandle(std::shared_ptr<SwapState> state, c10::intrusive_ptr<SavedTensor> inner,
             TensorIdentity identity, const at::Tensor& tensor)
      : state_(std::move(state)),
        inner_(std::move(inner)),
        identity_(std::move(identity)),
        storage_(tensor.storage().getWeakStorageImpl()) {
    // Where the compute stream stands once the tensor (and the inner store's buffers of it) are
    // made: a copy to the host waits for it.
    if (tensor.is_cuda()) made_ = StreamPoint::now(tensor.device());
  }

  ~SwapHandle() override { unregister(); }

  at::Tensor load() override {
    {
      std::unique_lock<std::mutex> lock(state_->mutex);
      if (users_ == 0) throw std::logic_error("saved tensor loaded after release()");
      if (where_ != Where::resident) {
        const auto start = Clock::now();
        bring_back_locked(lock);
        state_->stall_ns += ns_since(start);
      }
    }
    std::lock_guard<std::mutex> inner_lock(inner_mutex_);
    return inner_->load();
  }

  void release() override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (users_ == 0 || --users_ > 0) return;
      free_file_locked();
    }
    release_inner();
    unregister();
  }

  /// The last strong reference went without every user's release() (a graph dropped without
  /// backward, a load() that threw): give back what the handle holds. Never called with the
  /// state's mutex held (the store drops its references after unlocking).
  void release_resources() override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (users_ > 0) {
        users_ = 0;
        free_file_locked();
      }
    }
    release_inner();
    unregister();
  }

  /// An I/O job of this handle failed: load() reports `what` from now on, or rethrows
  /// `out_of_memory` (the device allocator's error) when given.
  void fail(const std::string& what, std::exception_ptr out_of_memory = nullptr) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (where_ == Where::writing || where_ == Where::out || where_ == Where::reading ||
        where_ == Where::queued_in) {
      if (where_ != Where::writing) --state_->regions_in_use;
    }
    error_ = what;
    out_of_memory_ = out_of_memory;
    where_ = Where::failed;
    state_->changed.notify_all();
  }

  /// The exception being handled failed an I/O job of this handle: fail() with `context` and
  /// its message, and the exception itself when it is the device allocator's out-of-memory error.
  void fail_current(const std::string& context) {
    try {
      throw;
    } catch (const c10::OutOfMemoryError& e) {
      fail(context + e.what(), std::current_exception());
    } catch (const std::exception& e) {
      fail(context + e.what());
    }
  }

  std::int64_t stored_bytes() const override {
    std::lock_guard<std::mutex> inner_lock(inner_mutex_);
    return inner_ ? inner_->stored_bytes() : 0;
  }

  // --- called with state_->mutex held ---
  bool add_user_locked() {
    if (users_ == 0) return false;
    ++users_;
    return true;
  }
  /// A save() of this handle in `unit` (-1: outside every unit).
  void saved_in_locked(int unit) {
    if (unit < 0 || static_cast<std::size_t>(unit) >= state_->unit_swapped.size() ||
        !state_->unit_swapped[static_cast<std::size_t>(unit)]) {
      swappable_ = false;
    }
    last_unit_ = std::max(last_unit_, unit);
  }
  bool swappable_locked() const { return swappable_ && users_ > 0 && where_ == Where::resident; }
  bool resident_locked() const { return where_ == Where::resident; }
  bool being_written_locked() const {
    return where_ == Where::queued_out || where_ == Where::writing;
  }
  int last_unit() const { return last_unit_; }
  const TensorIdentity& identity() const { return identity_; }
  void mark_registered() { registered_.store(true); }

  void queue_out_locked(const c10::intrusive_ptr<SwapHandle>& self) {
    where_ = Where::queued_out;
    state_->queue.push_back({self, true});
    state_->changed.notify_all();
  }

  /// Prefetch: queue the read back behind what is queued (a write not started is cancelled).
  void prefetch_locked(const c10::intrusive_ptr<SwapHandle>& self) {
    if (users_ == 0) return;
    if (where_ == Where::queued_out) {
      remove_jobs_locked();
      where_ = Where::resident;
    } else if (where_ == Where::writing) {
      want_in_ = true;
    } else if (where_ == Where::out) {
      where_ = Where::queued_in;
      state_->queue.push_back({self, false});
      ++state_->prefetched;
      state_->changed.notify_all();
    }
  }

  // --- the I/O thread's jobs, called without the mutex ---
  void write_out(const c10::intrusive_ptr<SwapHandle>& self) {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (where_ != Where::queued_out) return;
      where_ = Where::writing;
    }
    std::vector<at::Tensor> buffers;
    {
      std::lock_guard<std::mutex> inner_lock(inner_mutex_);
      if (inner_) buffers = inner_->take_buffers();
    }
    // Dense buffers in host memory go to the spill file; those of a CUDA tensor, to pinned host
    // memory.
    const bool on_device = made_.has_value();
    const bool movable =
        !buffers.empty() &&
        std::all_of(buffers.begin(), buffers.end(), [&](const at::Tensor& b) {
          return b.defined() && b.layout() == at::kStrided &&
                 (on_device ? b.device() == made_->device() : b.device().is_cpu()) &&
                 (b.numel() == 0 || b.is_non_overlapping_and_dense());
        });
    std::vector<Region> regions;
    std::int64_t total = 0;
    if (movable) {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (state_->regions_in_use == 0) state_->file_end = 0;  // nothing out: reuse the file
      ++state_->regions_in_use;
      for (const auto& b : buffers) {
        Region r;
        r.bytes = b.numel() * static_cast<std::int64_t>(b.element_size());
        r.offset = state_->file_end;
        r.sizes = b.sizes().vec();
        r.strides = b.strides().vec();
        r.dtype = b.scalar_type();
        if (!on_device) state_->file_end += (r.bytes + 63) / 64 * 64;
        total += r.bytes;
        regions.push_back(std::move(r));
      }
    }
    bool written = false;
    if (movable) {
      SpanGuard span("swap_out", "memory");
      const auto start = Clock::now();
      try {
        for (std::size_t i = 0; i < buffers.size(); ++i) {
          if (on_device) {
            std::int64_t copy_ns = 0;
            regions[i].host =
                state_->copier_for(made_->device()).to_host(buffers[i], *made_, &copy_ns);
            state_->copy_out_ns += copy_ns;
          } else {
            state_->transfer(true, static_cast<char*>(buffers[i].data_ptr()), regions[i].offset,
                             regions[i].bytes);
          }
        }
        written = true;
      } catch (const std::exception&) {
        written = false;  // keep the tensor in memory: swapping is an optimization
      }
      state_->swap_out_ns += ns_since(start);
    }
    if (!written) {
      {
        std::lock_guard<std::mutex> inner_lock(inner_mutex_);
        if (inner_ && !buffers.empty()) inner_->put_buffers(std::move(buffers));
      }
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (movable) --state_->regions_in_use;
      where_ = Where::resident;
      want_in_ = false;
      state_->changed.notify_all();
      return;
    }
    buffers.clear();  // the memory goes here, unless the forward pass still holds it
    std::lock_guard<std::mutex> lock(state_->mutex);
    regions_ = std::move(regions);
    ++state_->swapped_out_tensors;
    state_->swapped_out_bytes += total;
    where_ = Where::out;
    if (users_ == 0) {  // released while being written
      --state_->regions_in_use;
      where_ = Where::resident;
      regions_.clear();
    } else {
      state_->bytes_out += total;
      if (want_in_) {
        want_in_ = false;
        where_ = Where::queued_in;
        state_->queue.push_back({self, false});
        ++state_->prefetched;
      }
    }
    state_->changed.notify_all();
  }

  void read_in() {
    std::vector<Region> regions;
    bool demanded = false;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (where_ != Where::queued_in) return;
      if (state_->prefetch_paused && !demanded_) {
        leave_out_locked();  // queued before a prefetch of the step ran out of memory
        return;
      }
      where_ = Where::reading;
      regions = regions_;
      demanded = demanded_;
    }
    try {
      read_regions(regions);
    } catch (const c10::OutOfMemoryError&) {
      if (demanded) throw;  // load() waits for it: the handle fails with this error
      // A prefetch, early by design: the tensor stays out for load() to read when backward
      // needs it, when the memory it found taken may be free.
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->prefetch_paused = true;
      leave_out_locked();
    }
  }

 private:
  /// A prefetch not read back (the device had no room): the tensor stays out for load(), or,
  /// released meanwhile, its place in the file is freed (with the state's mutex held).
  void leave_out_locked() {
    where_ = Where::out;
    if (users_ == 0) {
      free_file_locked();
    } else {
      ++state_->prefetches_refused;
    }
    state_->changed.notify_all();
  }

  /// The handle's place in the file is free again (with the state's mutex held).
  void free_file_locked() {
    if (where_ == Where::out) {
      --state_->regions_in_use;
      state_->bytes_out -= out_bytes();
      where_ = Where::resident;
      regions_.clear();
    }
  }

  void release_inner() {
    c10::intrusive_ptr<SavedTensor> inner;
    std::lock_guard<std::mutex> inner_lock(inner_mutex_);
    inner = std::move(inner_);
    if (inner) inner->release();
  }

  std::int64_t out_bytes() const {
    std::int64_t total = 0;
    for (const auto& r : regions_) total += r.bytes;
    return total;
  }

  void remove_jobs_locked() {
    auto& q = state_->queue;
    q.erase(std::remove_if(q.begin(), q.end(),
                           [this](const SwapState::Job& j) { return j.handle.get() == this; }),
            q.end());
  }

  /// Waits until the data is in memory, queueing the read ahead of everything (on demand).
  void bring_back_locked(std::unique_lock<std::mutex>& lock) {
    while (where_ != Where::resident) {
      if (where_ == Where::failed) {
        if (out_of_memory_) std::rethrow_exception(out_of_memory_);
        throw std::runtime_error("swap: " + error_);
      }
      if (where_ == Where::queued_out) {  // never written: it has not left
        remove_jobs_locked();
        where_ = Where::resident;
        break;
      }
      if (where_ == Where::out || where_ == Where::queued_in) {
        remove_jobs_locked();
        if (!state_->io_running) {  // the store is gone: read here
          where_ = Where::reading;
          std::vector<Region> regions = regions_;
          lock.unlock();
          try {
            read_regions(regions);
          } catch (const std::exception&) {
            fail_current("");
          }
          lock.lock();
          continue;
        }
        where_ = Where::queued_in;
        demanded_ = true;
        state_->queue.push_front({c10::intrusive_ptr<SwapHandle>::reclaim_copy(this), false});
        ++state_->on_demand;
        state_->changed.notify_all();
      }
      state_->changed.wait(lock);  // writing or reading: wait for the I/O thread
    }
  }

  void read_regions(const std::vector<Region>& regions) {
    int refuse = state_->refuse_reads.load();
    while (refuse > 0 && !state_->refuse_reads.compare_exchange_weak(refuse, refuse - 1)) {
    }
    TORCH_CHECK_WITH(OutOfMemoryError, refuse <= 0,
                     "swap: a read back refused (SwapStoreOptions::refuse_reads)");
    std::vector<at::Tensor> buffers;
    std::int64_t total = 0;
    {
      SpanGuard span("swap_in", "memory");
      const auto start = Clock::now();
      for (const auto& r : regions) {
        at::Tensor b;
        if (r.host.defined()) {
          // From the copy stream's blocks, in use by the stream that saved it, which reads it in
          // backward (PinnedCopier::to_device).
          std::int64_t copy_ns = 0;
          b = state_->copier_for(made_->device()).to_device(r.host, *made_, &copy_ns);
          state_->copy_in_ns += copy_ns;
        } else {
          b = at::empty_strided(r.sizes, r.strides, at::TensorOptions().dtype(r.dtype));
          state_->transfer(false, static_cast<char*>(b.data_ptr()), r.offset, r.bytes);
        }
        total += r.bytes;
        buffers.push_back(std::move(b));
      }
      state_->swap_in_ns += ns_since(start);
    }
    {
      std::lock_guard<std::mutex> inner_lock(inner_mutex_);
      if (inner_) inner_->put_buffers(std::move(buffers));
    }
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->swapped_in_bytes += total;
    state_->bytes_out -= total;
    --state_->regions_in_use;
    regions_.clear();
    where_ = Where::resident;
    state_->changed.notify_all();
  }

  void unregister() {
    if (!registered_.exchange(false)) return;
    std::lock_guard<std::mutex> lock(state_->mutex);
    detail::erase_entry_of(state_->registry, identity_, this);
  }

  std::shared_ptr<SwapState> state_;
  mutable std::mutex inner_mutex_;  // serializes calls into inner_ (never held with the other)
  c10::intrusive_ptr<SavedTensor> inner_;
  const TensorIdentity identity_;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_;  // keeps the identity's address unique
  std::atomic<bool> registered_{false};
  // Set when made, then only read: a CUDA tensor's point of its stream when it was saved.
  std::optional<StreamPoint> made_;
  // Guarded by state_->mutex:
  int users_ = 1;
  int last_unit_ = -1;
  bool swappable_ = true;
  bool want_in_ = false;
  bool demanded_ = false;  // a load() waits for its read (not a prefetch's)
  Where where_ = Where::resident;
  std::vector<Region> regions_;
  std::string error_;  // why where_ is failed
  std::exception_ptr out_of_memory_;  // the device allocator's error, when that was why
};

void io_loop(SwapState* state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    state->changed.wait(lock, [state] { return state->stop || !state->queue.empty(); });
    if (state->queue.empty()) return;  // stop, nothing left
    SwapState::Job job = std::move(state->queue.front());
    state->queue.pop_front();
    state->busy = true;
    lock.unlock();
    try {
      if (job.out) {
        job.handle->write_out(job.handle);
      } else {
        job.handle->read_in();
      }
    } catch (const std::exception&) {
      // A failed read (or a failed allocation) must not end the process: the handle's load()
      // reports it, or rethrows the device allocator's error (reading back under a cap).
      job.handle->fail_current(std::string(job.out ? "writing" : "reading back") +
                               " a saved tensor failed: ");
    }
    job.handle.reset();  // may free the handle: without the lock
    lock.lock();
    state->busy = false;
    state->changed.notify_all();
  }
}

/// Queues the writes of those of `handles` that may still go (the state's mutex held).
void queue_out_locked(SwapState& state,
                      const std::vector<c10::intrusive_ptr<SwapHandle>>& handles) {
  for (const auto& h : handles) {
    if (!h->swappable_locked()) continue;
    const auto last = static_cast<std::size_t>(h->last_unit());
    if (state.out_by_unit.size() <= last) state.out_by_unit.resize(last + 1);
    state.out_by_unit[last].push_back(h);
    h->queue_out_locked(h);
  }
}

/// Waits until no transfer is queued or running.
void wait_idle_locked(SwapState& state, std::unique_lock<std::mutex>& lock) {
  state.changed.wait(lock, [&state] { return state.queue.empty() && !state.busy; });
}

/// Waits until none of `handles` is queued for writing or being written.
void wait_written_locked(SwapState& state, std::unique_lock<std::mutex>& lock,
                         const std::vector<c10::intrusive_ptr<SwapHandle>>& handles) {
  state.changed.wait(lock, [&handles] {
    return std::none_of(handles.begin(), handles.end(),
                        [](const auto& h) { return h->being_written_locked(); });
  });
}

bool tracked_kind(SavedKind kind) {
  return kind == SavedKind::activation || kind == SavedKind::relu_output;
}

}  // namespace

SwapStore::SwapStore(SwapStoreOptions options) : state_(std::make_shared<SwapState>()) {
  if (options.inner == nullptr) own_inner_ = std::make_unique<PlainStore>();
  inner_ = options.inner != nullptr ? options.inner : own_inner_.get();
  if (!(options.bandwidth_bytes_per_second >= 0)) {
    throw std::invalid_argument("swap: the bandwidth must be a non-negative number");
  }
  state_->bandwidth = options.bandwidth_bytes_per_second;
  state_->fail_after_bytes = options.fail_after_bytes;
  state_->refuse_reads = options.refuse_reads;
  const std::filesystem::path dir = options.spill_directory.empty()
                                        ? temporary_folder()
                                        : std::filesystem::path(options.spill_directory);
  std::string name = (dir / "engram-swap-XXXXXX").string();
  state_->fd = ::mkstemp(name.data());
  if (state_->fd < 0) {
    throw std::runtime_error("swap: cannot make a spill file in " + dir.string() + ": " +
                             std::strerror(errno));
  }
  ::unlink(name.c_str());  // the open descriptor keeps it; nothing is left on disk
  // No readahead: a read brings back its region and nothing around it into the page cache.
  ::posix_fadvise(state_->fd, 0, 0, POSIX_FADV_RANDOM);
  state_->io_running = true;
  state_->io = std::thread(io_loop, state_.get());
}

SwapStore::~SwapStore() {
  // Handles are dropped after unlocking: a last reference may release the handle, which locks.
  std::vector<c10::intrusive_ptr<SwapHandle>> pending, writes;
  std::vector<std::vector<c10::intrusive_ptr<SwapHandle>>> out_by_unit;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
    pending.swap(state_->pending);
    out_by_unit.swap(state_->out_by_unit);
    writes.swap(state_->unit_writes);
    state_->changed.notify_all();
  }
  state_->io.join();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->io_running = false;
  }
  // The pinned blocks the copies used go back to the system, but those handles still hold.
  bool copied = false;
  {
    std::lock_guard<std::mutex> lock(state_->copier_mutex);
    copied = state_->copier != nullptr;
  }
  if (copied) release_cached_pinned_memory();
}

c10::intrusive_ptr<SavedTensor> SwapStore::save(const at::Tensor& tensor, SavedKind kind) {
  if (!tracked_kind(kind) || !tensor.defined() || !tensor.has_storage() || tensor.numel() == 0) {
    return inner_->save(tensor, kind);
  }
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->forward_open) return inner_->save(tensor, kind);
  }
  TensorIdentity identity = identity_of(tensor);
  c10::intrusive_ptr<SwapHandle> found;  // released after the lock
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const auto it = state_->registry.find(identity);
    if (it != state_->registry.end()) {
      found = it->second.lock();
      if (found && found->add_user_locked()) {
        const int before = found->last_unit();
        found->saved_in_locked(state_->current_unit);
        // Already on its way out (written eagerly): it must also come back for this unit.
        if (!found->resident_locked() && found->last_unit() > before) {
          const auto u = static_cast<std::size_t>(found->last_unit());
          if (state_->out_by_unit.size() <= u) state_->out_by_unit.resize(u + 1);
          state_->out_by_unit[u].push_back(found);
        }
        return found;
      }
    }
  }
  auto handle = c10::make_intrusive<SwapHandle>(state_, inner_->save(tensor, kind),
                                                std::move(identity), tensor);
  std::lock_guard<std::mutex> lock(state_->mutex);
  handle->saved_in_locked(state_->current_unit);
  state_->registry.insert_or_assign(handle->identity(),
                                    c10::weak_intrusive_ptr<SwapHandle>(handle));
  handle->mark_registered();
  if (state_->eager && handle->swappable_locked()) {
    // A swapped unit followed by a swapped unit: written now, so its memory goes as soon as the
    // forward pass drops the tensor, not at the unit's end (a saved tensor no longer changes).
    queue_out_locked(*state_, {handle});
    state_->unit_writes.push_back(handle);
  } else {
    state_->pending.push_back(handle);
  }
  return handle;
}

void SwapStore::begin_unit(int unit, bool swapped, bool next_swapped) {
  if (unit < 0) throw std::invalid_argument("swap: unit indices start at 0");
  // The previous step's handles are dropped after unlocking (see ~SwapStore).
  std::vector<c10::intrusive_ptr<SwapHandle>> pending, writes;
  std::vector<std::vector<c10::intrusive_ptr<SwapHandle>>> out_by_unit;
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (unit == 0) {
    state_->prefetch_paused = false;
    state_->unit_swapped.clear();
    pending.swap(state_->pending);
    out_by_unit.swap(state_->out_by_unit);
    writes.swap(state_->unit_writes);
  }
  const auto u = static_cast<std::size_t>(unit);
  if (state_->unit_swapped.size() <= u) state_->unit_swapped.resize(u + 1, false);
  state_->unit_swapped[u] = swapped;
  state_->forward_open = true;
  state_->current_unit = unit;
  state_->eager = swapped && next_swapped;
}

void SwapStore::end_unit(const at::Tensor& output) {
  const c10::StorageImpl* output_storage =
      output.defined() && output.has_storage() ? output.storage().unsafeGetStorageImpl() : nullptr;
  // Declared before the lock: handles dropped here go after unlocking (see ~SwapStore).
  std::vector<c10::intrusive_ptr<SwapHandle>> still, leaving, dropped;
  std::unique_lock<std::mutex> lock(state_->mutex);
  const int unit = state_->current_unit;
  for (auto& h : state_->pending) {
    if (h->last_unit() == unit && h->identity().storage == output_storage) {
      still.push_back(std::move(h));  // the next unit may save it too
    } else if (h->swappable_locked()) {
      leaving.push_back(std::move(h));
    }
  }
  dropped.swap(state_->pending);
  state_->pending = std::move(still);
  state_->current_unit = -1;
  // The unit's tensors are written before the next unit begins: the forward pass holds at most
  // one unit's saved tensors beyond what stays, however fast the file is, in measured and real
  // runs alike (the writes themselves run on the I/O thread while this thread waits).
  queue_out_locked(*state_, leaving);
  leaving.insert(leaving.end(), state_->unit_writes.begin(), state_->unit_writes.end());
  dropped.insert(dropped.end(), state_->unit_writes.begin(), state_->unit_writes.end());
  state_->unit_writes.clear();
  state_->eager = false;
  wait_written_locked(*state_, lock, leaving);
  lock.unlock();
}

void SwapStore::end_forward() {
  int end_of_forward = 0;
  {
    std::vector<c10::intrusive_ptr<SwapHandle>> leaving, dropped;  // dropped after unlocking
    std::unique_lock<std::mutex> lock(state_->mutex);
    for (auto& h : state_->pending) {
      if (h->swappable_locked()) leaving.push_back(std::move(h));
    }
    dropped.swap(state_->pending);
    queue_out_locked(*state_, leaving);
    wait_written_locked(*state_, lock, leaving);
    state_->forward_open = false;
    state_->current_unit = -1;
    end_of_forward = static_cast<int>(state_->unit_swapped.size());
    lock.unlock();
  }
  backward_begins(end_of_forward);
}

void SwapStore::backward_begins(int trigger) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (trigger < 0 || static_cast<std::size_t>(trigger) >= state_->prefetch_at.size()) return;
  if (state_->prefetch_paused) return;  // read on demand for the rest of the step
  for (const int unit : state_->prefetch_at[static_cast<std::size_t>(trigger)]) {
    if (unit < 0 || static_cast<std::size_t>(unit) >= state_->out_by_unit.size()) continue;
    // Backward needs a unit's tensors in the reverse of the order they were saved in.
    auto& handles = state_->out_by_unit[static_cast<std::size_t>(unit)];
    for (auto it = handles.rbegin(); it != handles.rend(); ++it) (*it)->prefetch_locked(*it);
  }
  if (state_->synchronous) wait_idle_locked(*state_, lock);
}

void SwapStore::set_synchronous(bool on) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->synchronous = on;
}

void SwapStore::set_prefetch_schedule(std::vector<std::vector<int>> prefetch_at) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->prefetch_at = std::move(prefetch_at);
}

void SwapStore::wait_for_transfers() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->changed.wait(lock, [this] { return state_->queue.empty() && !state_->busy; });
}

SwapStats SwapStore::stats() const {
  const auto& s = *state_;
  SwapStats out;
  out.swapped_out_tensors = s.swapped_out_tensors;
  out.swapped_out_bytes = s.swapped_out_bytes;
  out.swapped_in_bytes = s.swapped_in_bytes;
  out.prefetched = s.prefetched;
  out.on_demand = s.on_demand;
  out.prefetches_refused = s.prefetches_refused;
  out.stall_ns = s.stall_ns;
  out.swap_out_ns = s.swap_out_ns;
  out.swap_in_ns = s.swap_in_ns;
  out.copy_out_ns = s.copy_out_ns;
  out.copy_in_ns = s.copy_in_ns;
  out.resident_after_write_bytes = s.resident_after_write;
  return out;
}

void SwapStore::reset_stats() {
  auto& s = *state_;
  for (auto* counter :
       {&s.swapped_out_tensors, &s.swapped_out_bytes, &s.swapped_in_bytes, &s.prefetched,
        &s.on_demand, &s.prefetches_refused, &s.stall_ns, &s.swap_out_ns, &s.swap_in_ns,
        &s.copy_out_ns, &s.copy_in_ns, &s.resident_after_write}) {
    counter->store(0);
  }
}

std::int64_t SwapStore::bytes_out() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->bytes_out;
}

std::int64_t SwapStore::spill_resident_bytes() const {
  const off_t size = ::lseek(state_->fd, 0, SEEK_END);
  return size > 0 ? state_->resident_bytes(0, size) : 0;
}

}  // namespace engram::memory
