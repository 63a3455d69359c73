#pragma once
/// \file
/// The bookkeeping of fixed-structure reuse (memory/ArenaReuse.h on the host,
/// memory/DeviceArenaReuse.h on a CUDA device), without memory of its own: the plans by step
/// signature, each step's allocations in order and their lifetimes, the offset in the arena each
/// planned allocation is served at, and which arena bytes are taken. Its owners hold the arena's
/// bytes, lock around every call, and say when bytes an allocation held may be served again
/// (on the host at once; on a device once the streams that used them are past their last use).
/// Torch-free, so that the same rules are tested on any machine.
///
/// \code
///   detail::ReuseSequence seq(/*alignment=*/512);
///   seq.begin(signature);
///   auto at = seq.allocate(bytes);            // at.offset < 0: the ordinary allocator
///   void* block = at.offset >= 0 ? arena + at.offset : heap(bytes);
///   seq.bind(at.index, block);
///   ...
///   std::int64_t offset = seq.released(block, arena);  // the lifetime ends; its offset or -1
///   if (offset >= 0) seq.vacate(offset);                // its bytes may be served again
///   ReuseStep step = seq.end();
///   seq.grow([&] { free(arena); }, [&](std::int64_t n) { return (arena = heap(n)) != nullptr; });
/// \endcode

#include "memory/ArenaReuse.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace engram::memory::detail {

/// Whether the calling thread is inside a ReuseBypass (memory/ArenaReuse.h): its allocations
/// are no part of any step, on the host or a device.
bool reuse_bypassed();

class ReuseSequence {
 public:
  /// Where the open step's allocation goes: its index in the step, and its offset in the arena,
  /// or -1 for the ordinary allocator (recording, planned so, after a miss, or a conflict).
  struct Placement {
    std::size_t index = 0;
    std::int64_t offset = -1;
  };

  /// `alignment` (a power of two): every planned block's offset and bytes are multiples of it.
  explicit ReuseSequence(std::int64_t alignment);

  /// Opens a step: served from `signature`'s plan if there is one, else recorded. Throws
  /// std::logic_error when a step is open.
  void begin(std::uint64_t signature);
  bool open() const { return open_; }

  /// The open step's next allocation of `bytes` (> 0). Throws std::logic_error without a step.
  Placement allocate(std::int64_t bytes);
  /// The block that holds the allocation `index` (in the arena or not): its release ends the
  /// allocation's lifetime in the recorded sequence.
  void bind(std::size_t index, const void* block);
  /// An allocation of another thread or stream during the step: counted, never planned.
  void note_foreign() { ++step_.foreign; }

  /// A block is released (at any time): ends its lifetime if the open step made it. Returns its
  /// offset in the arena when it lies there (`arena` is the arena's first byte), else -1. The
  /// bytes stay taken until vacate().
  std::int64_t released(const void* block, const void* arena);
  /// The offset of `block` in the arena that begins at `arena` (its capacity() bytes), or -1
  /// when it lies outside (or there is no arena).
  std::int64_t offset_in_arena(const void* block, const void* arena) const;
  /// The arena bytes at `offset` may be served again.
  void vacate(std::int64_t offset);

  /// Ends the step, planning it when it was recorded or left its plan (its own sequence is the
  /// signature's plan then). Throws std::logic_error without a step.
  ReuseStep end();

  /// The largest plan's arena; the arena's size now (set_capacity); whether no arena bytes are
  /// taken (only then may the arena be replaced).
  std::int64_t wanted_capacity() const { return wanted_; }
  std::int64_t capacity() const { return capacity_; }
  bool idle() const { return taken_.empty(); }
  void set_capacity(std::int64_t bytes);
  /// What the arena should grow to now: the largest plan's arena, when that is more than the
  /// arena holds, no step is open, none of its bytes are taken and that size was not refused;
  /// else 0.
  std::int64_t growth() const;
  /// The arena could not grow to `bytes` (a device out of memory): growth() does not offer that
  /// size again, only a larger plan's or after forget_plans().
  void refuse_growth(std::int64_t bytes) { refused_ = bytes; }
  /// Replaces the arena when growth() says so, through its owner's memory: `free_arena()` gives
  /// the arena's bytes back, `allocate_arena(n)` tries to get n bytes and says whether it did.
  /// A size refused is refuse_growth()'s; the arena it had is then asked for again, and kept if
  /// it is had, else there is none (planned allocations beyond it are conflicts). The capacity
  /// follows. Whether the arena grew.
  bool grow(const std::function<void()>& free_arena,
            const std::function<bool(std::int64_t)>& allocate_arena);

  long plans() const { return static_cast<long>(plans_.size()); }
  /// Drops every plan (the next step of any signature is recorded) and the capacity wanted.
  /// Throws std::logic_error while a step is open.
  void forget_plans();

 private:
  struct Plan {
    std::vector<std::int64_t> bytes;
    std::vector<std::int64_t> offsets;  // -1: ordinary allocator
    std::int64_t arena_bytes = 0;
    std::int64_t lower_bound = 0;
    std::string strategy;
    double plan_seconds = 0;
  };
  struct Recorded {
    std::int64_t bytes = 0;
    int first = 0;
    int last = -1;  // -1: still live when the step ended
  };

  std::int64_t serve(std::size_t index, std::int64_t bytes);
  bool is_free(std::int64_t offset, std::int64_t end) const;
  Plan make_plan() const;

  std::int64_t alignment_;
  std::unordered_map<std::uint64_t, Plan> plans_;
  std::int64_t capacity_ = 0;
  std::int64_t wanted_ = 0;
  std::int64_t refused_ = 0;
  std::map<std::int64_t, std::int64_t> taken_;  // arena bytes taken: offset -> end

  bool open_ = false;
  const Plan* plan_ = nullptr;  // serving; nullptr: recording
  std::size_t next_ = 0;
  int events_ = 0;
  std::vector<Recorded> recorded_;
  std::unordered_map<const void*, std::size_t> recorded_live_;  // block -> index in recorded_
  ReuseStep step_;
};

}  // namespace engram::memory::detail
