#pragma once
/// \file
/// Offsets in one arena for the allocations of a step whose sequence repeats (fixed-structure
/// memory reuse, US20190303025A1): each recorded allocation is a block of some bytes live from
/// its allocation to its release, two blocks live at the same time must not overlap, and the
/// arena is as small as the strategies of Pisarchyk & Lee ("Efficient Memory Management for
/// Deep Neural Net Inference", 2020; TFLite's arena planner) can make it:
///   - greedy by size: the blocks largest first, each at the best-fitting gap among the blocks
///     it shares time with (the smallest gap that holds it, else above them all);
///   - greedy by breadth: the instants with the most live bytes first, and at each its
///     unplaced blocks largest first, placed the same way.
/// No plan can be smaller than the lower bound, the most bytes live at any one instant.
/// Torch-free: sizes and event indices in, offsets out.
///
/// \code
///   std::vector<engram::memory::BlockUse> blocks{{4096, 0, 3}, {1024, 1, 2}, {4096, 4, 5}};
///   auto plan = engram::memory::plan_arena(blocks);
///   plan.arena_bytes;   // 5120: the third block reuses the first's bytes
///   plan.lower_bound;   // 5120
/// \endcode

#include <cstdint>
#include <string>
#include <vector>

namespace engram::memory {

/// One allocation of a recorded step: its bytes and its lifetime in the step's event order (an
/// event is an allocation or a release); live over [first, last], both included.
struct BlockUse {
  std::int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

enum class PlanStrategy { kGreedyBySize, kGreedyByBreadth };
const char* strategy_name(PlanStrategy strategy);

struct ArenaPlan {
  PlanStrategy strategy = PlanStrategy::kGreedyBySize;
  std::vector<std::int64_t> offsets;  ///< per block, a multiple of the alignment
  std::int64_t arena_bytes = 0;       ///< the end of the highest block
  std::int64_t lower_bound = 0;       ///< the most (aligned) bytes live at one instant
};

/// Bytes rounded up to `alignment` (a power of two), as the arena places them.
std::int64_t aligned_bytes(std::int64_t bytes, std::int64_t alignment);

/// The most bytes live at any instant, each block's bytes rounded up to `alignment`.
std::int64_t live_bytes_lower_bound(const std::vector<BlockUse>& blocks,
                                    std::int64_t alignment = 64);

/// One strategy's plan. Throws std::invalid_argument for a block with negative bytes, a
/// lifetime that ends before it starts, or an alignment that is not a power of two.
ArenaPlan plan_greedy_by_size(const std::vector<BlockUse>& blocks, std::int64_t alignment = 64);
ArenaPlan plan_greedy_by_breadth(const std::vector<BlockUse>& blocks, std::int64_t alignment = 64);
/// Both strategies; the smaller arena (greedy by size on a tie).
ArenaPlan plan_arena(const std::vector<BlockUse>& blocks, std::int64_t alignment = 64);

/// One event of a recorded allocation sequence: an allocation of `bytes` (> 0) or the release
/// (`bytes` < 0) of allocation `id`.
struct AllocationEvent {
  std::uint64_t id = 0;
  std::int64_t bytes = 0;
};

/// The blocks plan_arena() places for a recorded step: each allocation released within the
/// sequence, live from its allocation's event index to its release's. An allocation never
/// released outlives the step (fixed-structure reuse leaves it to the ordinary allocator): its
/// bytes go to `outliving_bytes` (if given); a release of an allocation made before the sequence
/// is left out.
std::vector<BlockUse> step_blocks(const std::vector<AllocationEvent>& events,
                                  std::int64_t* outliving_bytes = nullptr);

/// Empty when no two blocks live at the same time overlap in the arena and every block lies
/// within it; else what is wrong, naming the blocks (a check for tests and debug builds).
std::string check_plan(const std::vector<BlockUse>& blocks, const ArenaPlan& plan,
                       std::int64_t alignment = 64);

}  // namespace engram::memory
