#pragma once
/// \file
/// Copies between a CUDA device and pinned host memory, for swapping a CUDA workload's saved
/// tensors (memory/SwapStore.h): on a copy stream of their own (one per device, from c10's stream
/// pool), ordered after the compute stream's work by CUDA events, into host buffers from
/// LibTorch's caching host allocator (a pool of pinned blocks: after the first step every buffer
/// is a reused one, no cudaHostAlloc per tensor).
///
/// \code
///   engram::memory::StreamPoint made = engram::memory::StreamPoint::now(tensor.device());
///   engram::memory::PinnedCopier copier(tensor.device());   // on any thread
///   at::Tensor host = copier.to_host(tensor, made);         // returns once the bytes landed
///   at::Tensor back = copier.to_device(host, made);         // read on made's stream
///   engram::memory::BusBandwidth bus = engram::memory::measure_bus_bandwidth(tensor.device());
/// \endcode
///
/// Each copy returns when its bytes have landed (the calling thread, the swap store's I/O thread,
/// waits on the copy's event), so a buffer handed back is complete and one given up can be freed:
/// the training thread never waits, and compute never reads a buffer before its copy lands. A
/// buffer copied back comes from the copy stream's blocks and is marked in use by the stream the
/// point names (the compute stream, where it is read) with the caching allocator's recordStream.
/// Without a CUDA device every call throws std::runtime_error. The header includes no CUDA header.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

namespace engram::memory {

/// A point in a CUDA stream's work: an event recorded on it.
class StreamPoint {
 public:
  /// The point reached now by the current stream of `device` (a CUDA device).
  static StreamPoint now(const c10::Device& device);
  c10::Device device() const;

  struct State;
  explicit StreamPoint(std::shared_ptr<State> state) : state_(std::move(state)) {}
  const State& state() const { return *state_; }

 private:
  std::shared_ptr<State> state_;
};

class PinnedCopier {
 public:
  /// For `device` (a CUDA device); takes a copy stream from the pool.
  explicit PinnedCopier(const c10::Device& device);
  ~PinnedCopier();
  PinnedCopier(const PinnedCopier&) = delete;
  PinnedCopier& operator=(const PinnedCopier&) = delete;

  /// A pinned host copy of `buffer` (dense, on the copier's device) made after the work before
  /// `after`; returns once it has landed. `copy_ns` (if given) gets the copy's own time, from
  /// events on the copy stream around it (not the wait for `after`).
  at::Tensor to_host(const at::Tensor& buffer, const StreamPoint& after,
                     std::int64_t* copy_ns = nullptr);
  /// A copy of `host` (pinned) on the copier's device, for the stream of `on` to read: allocated
  /// on the copy stream, written there, and recorded as in use by `on`'s stream (so that the
  /// caching allocator reuses its block only after that stream's work with it), without waiting
  /// for the work `on`'s stream has queued; returns once it has landed. `copy_ns` as to_host's.
  at::Tensor to_device(const at::Tensor& host, const StreamPoint& on,
                       std::int64_t* copy_ns = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Gives the pinned blocks LibTorch's caching host allocator keeps cached back to the system.
void release_cached_pinned_memory();

/// Pinned copies' throughput in bytes per second, each direction the median of `repeats` copies
/// of `bytes` timed with CUDA events on a copy stream: the bus's peak as the swap store sees it.
struct BusBandwidth {
  double device_to_host = 0, host_to_device = 0;
  std::int64_t bytes = 0;
  int repeats = 0;
};
BusBandwidth measure_bus_bandwidth(const c10::Device& device,
                                   std::int64_t bytes = std::int64_t{256} << 20, int repeats = 5);

}  // namespace engram::memory
