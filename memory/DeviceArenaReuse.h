#pragma once
/// \file
/// Fixed-structure memory reuse on a CUDA device: memory/ArenaReuse.h's plans (the same
/// bookkeeping, memory/detail/ReuseSequence.h) for the step's CUDA allocations, served from one
/// device arena that LibTorch's caching allocator holds as one allocation. install() puts a
/// delegating allocator in front of the caching one (c10's CUDA allocator and
/// c10::GetAllocator(kCUDA) both point to it): outside a step, on another device or stream, and
/// for every query (stats, limits, emptyCache) it hands the call to the caching allocator, which
/// stays the fallback; during a step it serves the step's k-th allocation at its planned offset.
///
/// \code
///   auto& reuse = engram::memory::DeviceArenaReuse::install(0);  // device 0, once per process
///   for (auto& batch : batches) {
///     reuse.begin_step(signature_of(batch));  // the calling thread's current stream
///     train_step(batch);
///     engram::memory::ReuseStep s = reuse.end_step();
///   }
///   reuse.release();  // the arena back to the caching allocator, the plans forgotten
/// \endcode
///
/// A step's allocations are those on the arena's device and the stream current when the step
/// began, from any thread (autograd runs a CUDA backward on a thread of its own), outside a
/// ReuseBypass; the others are `foreign`. Bytes are served again only when that is safe in stream
/// order: a block used on another stream (recordStream) keeps its bytes until events recorded on
/// those streams at its release have completed; before then, an allocation planned on them gets
/// bytes of its own (a conflict). The rest is as on the host: a miss falls back to the caching
/// allocator for the step's remainder and replans; an allocation that outlived the recorded step
/// is left to the caching allocator. If the arena cannot grow (the device is out of memory, or
/// under --memory-cap), allocations planned beyond it are conflicts.
///
/// What the device holds: the arena is one allocation of the caching allocator, so
/// memory/CudaMemoryTracker.h and the allocator's statistics count it (live and reserved) for as
/// long as it is held, and never the blocks served inside it.
///
/// This header includes no torch or CUDA header.

#include "memory/ArenaReuse.h"

#include <cstdint>

namespace engram::memory {

class DeviceArenaReuse {
 public:
  /// Puts the delegating allocator in front of the CUDA caching allocator (once per process;
  /// allocations made before keep their own deleters) and serves `device`. Throws
  /// std::runtime_error without a CUDA device, std::invalid_argument for a device index out of
  /// range or another device than the first install()'s.
  static DeviceArenaReuse& install(int device);
  /// The installed instance, or nullptr.
  static DeviceArenaReuse* installed();

  /// Starts a step on the calling thread's current stream of the device. Throws
  /// std::logic_error when a step is open.
  void begin_step(std::uint64_t signature);
  /// Ends the step (planning a recorded one) and grows the arena to the largest plan when none
  /// of its bytes are taken. Throws std::logic_error without an open step.
  ReuseStep end_step();
  /// Forgets every plan and gives the arena back to the caching allocator (at once, or when its
  /// last taken bytes are released). Throws std::logic_error while a step is open.
  void release();

  long plans() const;
  std::int64_t capacity_bytes() const;
  /// Whether `data` lies in the arena.
  bool in_arena(const void* data) const;
  int device() const { return device_; }

  DeviceArenaReuse(const DeviceArenaReuse&) = delete;
  DeviceArenaReuse& operator=(const DeviceArenaReuse&) = delete;

 private:
  explicit DeviceArenaReuse(int device);
  int device_;
};

}  // namespace engram::memory
