#pragma once
/// \file
/// The swap technique as an activation store (docs/ARCHITECTURE.md): the tensors that chosen
/// units of a network save for backward are written to a spill file once the forward pass is
/// past them, and the memory they held is freed; they are read back, on an I/O thread, before
/// the backward pass needs them: at start points from the timing-slack schedule
/// (memory/SlackAnalysis.h), or on demand when backward asks for a tensor that is not back yet.
///
/// \code
///   engram::memory::SwapStore store;                 // wraps a PlainStore; or SwapStoreOptions
///   store.set_prefetch_schedule(schedule.prefetch_at);   // optional: else on demand
///   {
///     engram::nn::RuntimeGuard use(&store, nullptr);
///     // the unit runner (nn/Units.h) brackets every unit's forward:
///     store.begin_unit(0, /*swapped=*/true);   ... store.end_unit(output0);
///     store.begin_unit(1, /*swapped=*/false);  ... store.end_unit(output1);
///     store.end_forward();
///     loss.backward();      // the runner calls store.backward_begins(k) as unit k's begins
///   }
///   store.stats().stall_ns;    // how long backward waited for tensors to come back
/// \endcode
///
/// Which tensors move: a tensor saved (kind activation or relu_output) during the forward of a
/// *swapped* unit, and by no other save that is not in a swapped unit (a tensor saved again by a
/// kept unit or outside every unit, such as a unit's output that the next unit also saves, stays
/// in memory). Saves of the same tensor (same storage, offset, sizes, strides, version) share one
/// handle, as in CompressingStore, so it moves once. A tensor is written out at the first
/// end_unit() after the last unit that can still save it (the unit's output may be saved by the
/// next unit: it is decided one unit later, or at end_forward()), and end_unit() returns once
/// those writes are done (the I/O thread writes; the training thread waits), so the forward
/// pass never holds more than one unit's tensors on their way out. Only what the store itself
/// holds is freed; the memory drops when the forward pass has dropped the tensor too.
///
/// When a tensor comes back: the backward pass needs a tensor first in the backward of the last
/// unit that saved it. set_prefetch_schedule(prefetch_at) names, for each trigger t (t = number
/// of units: end_forward(); t = k: backward_begins(k)), the units whose tensors to queue for
/// reading back then (each unit's in the reverse of the order they were saved in: the order
/// backward needs them). Without a schedule, or for a tensor not back in time, load() queues it
/// ahead of every queued transfer (on demand) and waits; the waits are stats().stall_ns.
///
/// The inner store (PlainStore by default, or a CompressingStore: swap then moves the compressed
/// buffers) keeps tensors while they are in memory; the swap store moves what the inner
/// handle's take_buffers() hands over and puts it back with put_buffers(). Buffers that are not
/// non-overlapping and dense stay in memory.
///
/// The buffers of a CUDA tensor go to pinned host memory instead of the spill file
/// (memory/PinnedCopy.h): on a copy stream of the store's own, after the compute stream's work
/// that made the tensor (an event recorded at save()), into blocks of LibTorch's caching host
/// allocator (a pool of pinned memory), and back onto the device, into the copy stream's blocks
/// marked in use by the stream that saved them (which reads them in backward; the caching
/// allocator gives such a block back to the copy stream's pool, not to the compute stream's,
/// which a cap counts among the reserved bytes until it is reused or emptied, the price of
/// copies that start before the compute stream's queued work has finished); the I/O thread
/// waits for each copy to land, so a buffer is freed only after its copy and handed back only
/// complete. One CUDA device per store; throttling and the page-cache figures are the spill
/// file's only. A prefetch that runs out of device memory (a cap) leaves its tensor out for
/// load() to read on demand, as are the step's other swapped tensors from then on; when such a
/// read runs out of memory too, load() throws the allocator's c10::OutOfMemoryError itself. The
/// store gives the pinned blocks the host allocator cached back when it is destroyed.
///
/// The spill file is created in `spill_directory` and unlinked at once (nothing is left on disk,
/// whatever happens to the process); its space is reused whenever nothing is out.
/// `bandwidth_bytes_per_second` > 0 throttles every transfer to that rate (--swap-bandwidth), so
/// that overlap can be studied on a machine whose page cache makes the file nearly free.
/// Transfers are recorded as spans "swap_out" and "swap_in" (category "memory") in the memory
/// tracker's open window, from the I/O thread; buffers read back are allocated there (tagged
/// activation). One forward and backward at a time; save() and the unit calls come from the
/// training thread.

#include "memory/ActivationStore.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engram::memory {
namespace detail {
struct SwapState;
}  // namespace detail

struct SwapStoreOptions {
  /// Keeps the tensors while in memory; nullptr: a PlainStore of the swap store's own. Must
  /// outlive the swap store's handles.
  ActivationStore* inner = nullptr;
  /// Where the (unlinked) spill file is made; empty: the system's temporary directory.
  std::string spill_directory;
  /// Throttles transfers to this many bytes per second; 0: as fast as the file goes.
  double bandwidth_bytes_per_second = 0;
  /// Fault injection for tests: once this many bytes have moved through the spill file, every
  /// further write or read fails with EIO; negative: never.
  std::int64_t fail_after_bytes = -1;
  /// Fault injection for tests: the first this many reads back throw c10::OutOfMemoryError, as
  /// the device's allocator does when a read back does not fit under a cap.
  int refuse_reads = 0;
};

/// What a SwapStore did since it was made or since reset_stats().
struct SwapStats {
  std::int64_t swapped_out_tensors = 0;  ///< handles written to the spill file
  std::int64_t swapped_out_bytes = 0;
  std::int64_t swapped_in_bytes = 0;
  std::int64_t prefetched = 0;   ///< swap-ins queued by the schedule
  std::int64_t on_demand = 0;    ///< swap-ins queued by a load() that found its tensor out
  /// Prefetches refused for want of device memory: the one that ran out and those queued before
  /// it ran out in the same step. Their tensors stay out for load() to read when backward needs
  /// them (a prefetch is early, and memory may be free by then), and no prefetch starts for the
  /// rest of the step (each refusal has the caching allocator empty its cache first).
  std::int64_t prefetches_refused = 0;
  std::int64_t stall_ns = 0;     ///< time load() waited for tensors to come back
  std::int64_t swap_out_ns = 0;  ///< I/O thread time spent writing (throttling included)
  std::int64_t swap_in_ns = 0;   ///< I/O thread time spent reading (throttling included)
  /// CUDA tensors' pinned copies (memory/PinnedCopy.h): the copies' own time on the copy stream
  /// (CUDA events), to the host and back, without the waits for the compute stream.
  std::int64_t copy_out_ns = 0, copy_in_ns = 0;
  /// The spill file's pages still in memory (the kernel's page cache, mincore) just after a
  /// write was flushed and dropped: the most over the writes (0 when swapped bytes really left
  /// memory; a tmpfs spill directory keeps them all).
  std::int64_t resident_after_write_bytes = 0;
};

class SwapStore : public ActivationStore {
 public:
  /// Throws std::runtime_error when the spill file cannot be made.
  explicit SwapStore(SwapStoreOptions options = {});
  /// Waits for queued transfers; handles that outlive the store read back on demand.
  ~SwapStore() override;
  SwapStore(const SwapStore&) = delete;
  SwapStore& operator=(const SwapStore&) = delete;

  c10::intrusive_ptr<SavedTensor> save(const at::Tensor& tensor, SavedKind kind) override;
  const char* name() const override { return "swap"; }

  /// Forward of unit `unit` (0, 1, ... in order) begins; `swapped`: its saved tensors may move.
  /// `next_swapped`: the next unit is swapped too, so even the unit's output (which the next
  /// unit saves again) may move: every tensor is then written as soon as it is saved, and its
  /// memory goes as soon as the forward pass drops it. Unit 0 begins a new step: the previous
  /// step's bookkeeping is dropped.
  void begin_unit(int unit, bool swapped, bool next_swapped = false);
  /// The current unit's forward has ended with `output` (see the file comment).
  void end_unit(const at::Tensor& output);
  /// The forward pass has ended: what may move is queued out; trigger "end of forward" fires.
  void end_forward();
  /// Unit `unit`'s backward begins: its trigger fires.
  void backward_begins(int unit);

  /// prefetch_at[t]: the units whose tensors come back at trigger t (see the file comment);
  /// empty: every tensor comes back on demand.
  void set_prefetch_schedule(std::vector<std::vector<int>> prefetch_at);
  /// Blocks until every queued transfer is done.
  void wait_for_transfers();
  /// Synchronous reads (for measuring a plan's memory): backward_begins() and end_forward()
  /// return only when the reads they queued are done, so every tensor comes back as early as the
  /// schedule allows: the most memory a prefetch schedule can hold at any moment. Asynchronous
  /// (the default) returns at once and reads while backward runs.
  void set_synchronous(bool on);

  SwapStats stats() const;
  void reset_stats();
  /// Bytes of the handles that are out now (written, not read back).
  std::int64_t bytes_out() const;
  /// The spill file's bytes in the page cache now (mincore over the whole file).
  std::int64_t spill_resident_bytes() const;

 private:
  std::unique_ptr<PlainStore> own_inner_;
  ActivationStore* inner_;
  std::shared_ptr<detail::SwapState> state_;
};

}  // namespace engram::memory
