#pragma once
/// \file
/// Fixed-structure memory reuse (US20190303025A1): a training step of a network of fixed
/// structure makes the same allocations in the same order every time, so the first step of a
/// kind records them (size, order of allocation and release), memory/ArenaPlanner.h gives each
/// an offset in one arena, and every later step of that kind is served from the arena: its k-th
/// allocation at the k-th planned offset. Behind the tracker (memory/MemoryTracker.h): the
/// tracker still counts every allocation; only where the bytes come from changes.
///
/// \code
///   auto& reuse = engram::memory::ArenaReuse::install();   // once per process, idempotent
///   for (auto& batch : batches) {
///     reuse.begin_step(signature_of(batch));   // what makes two steps' sequences the same
///     train_step(batch);
///     engram::memory::ReuseStep s = reuse.end_step();
///     s.hits;  s.missed;  s.arena_bytes;  s.lower_bound;
///   }
/// \endcode
///
/// Never wrong, at worst unhelpful: only the thread that began the step is served (other
/// threads' allocations go to the ordinary allocator); an allocation that outlived the recorded
/// step is planned on the ordinary allocator; an allocation whose planned bytes are still held
/// by a block that lives longer this time gets bytes of its own from the ordinary allocator (a
/// conflict); and a step whose sequence differs from its plan (another size at some position)
/// goes to the ordinary allocator from there to its end and counts a miss; the sequence of a step
/// that missed replaces its signature's plan (training's first steps allocate gradients and
/// optimizer state once, so plans settle by the third step). Plans are cached by signature, and one
/// arena, as large as the largest plan, serves them all (one step runs at a time).

#include <cstdint>
#include <string>

namespace engram::memory {

/// One step's use of the arena.
struct ReuseStep {
  std::uint64_t signature = 0;
  bool recorded = false;  ///< the first step of its signature: recorded, planned at its end
  long allocations = 0;   ///< by the step's thread during the step
  long hits = 0;          ///< served at their planned offset in the arena
  long heap = 0;          ///< from the ordinary allocator (planned so, or after a miss)
  bool missed = false;    ///< the sequence left its plan (see the file comment)
  /// Allocations whose planned bytes were still held (a block that outlived its plan, say one
  /// the swap store's I/O thread still writes): each from the ordinary allocator alone.
  long conflicts = 0;
  bool replanned = false;  ///< it missed, and its own sequence is the signature's plan now
  long foreign = 0;        ///< allocations of other threads during the step (ordinary allocator)
  std::int64_t arena_bytes = 0;  ///< the signature's plan: its arena
  std::int64_t lower_bound = 0;  ///< the most bytes its step holds at once (no plan is smaller)
  std::string strategy;          ///< greedy_by_size or greedy_by_breadth
  double plan_seconds = 0;       ///< planning time (the recorded step only)
};

/// In its scope the calling thread's allocations go to the ordinary allocator and are no part
/// of the step's sequence: for buffers whose sizes depend on the data (the compressed ReLU
/// outputs of memory/CompressingStore.h), which would otherwise make every step miss its plan.
class ReuseBypass {
 public:
  ReuseBypass();
  ~ReuseBypass();
  ReuseBypass(const ReuseBypass&) = delete;
  ReuseBypass& operator=(const ReuseBypass&) = delete;

 private:
  bool before_;
};

class ArenaReuse {
 public:
  /// Installs the tracker (if not yet) and this source of blocks; returns the one instance.
  static ArenaReuse& install();
  /// The installed instance, or nullptr.
  static ArenaReuse* installed();

  /// Starts a step on the calling thread: served from the plan of `signature` if there is one,
  /// else recorded. Throws std::logic_error when a step is already open.
  void begin_step(std::uint64_t signature);
  /// Ends the step (planning a recorded one). Throws std::logic_error without an open step.
  ReuseStep end_step();

  /// Number of cached plans, and the arena's size: the largest plan's, once no block of the
  /// arena is live when it has to grow. When the host cannot allocate that size (c10's "not
  /// enough memory"), the arena stays as it was and the planned allocations beyond it are
  /// conflicts; that size is not tried again until a plan wants more.
  long plans() const;
  std::int64_t capacity_bytes() const;
  /// Whether `data` lies in the arena (for tests and reports).
  bool in_arena(const void* data) const;

  ArenaReuse(const ArenaReuse&) = delete;
  ArenaReuse& operator=(const ArenaReuse&) = delete;

 private:
  ArenaReuse();
  struct State;
  State* state_;  // never freed: blocks it gave may be released at any time
};

}  // namespace engram::memory
