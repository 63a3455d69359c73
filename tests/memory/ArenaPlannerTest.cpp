#include "memory/ArenaPlanner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

namespace engram::memory {
namespace {

constexpr std::int64_t kA = 64;  // the alignment of the tests' sizes

/// The most aligned bytes live at one time (a block is live from its first to its last use, both
/// included), summed time by time: the planner's lower bound, computed here on its own.
std::int64_t most_live_bytes(const std::vector<BlockUse>& blocks, std::int64_t alignment) {
  int end = 0;
  for (const auto& b : blocks) end = std::max(end, b.last);
  std::int64_t most = 0;
  for (int t = 0; t <= end; ++t) {
    std::int64_t live = 0;
    for (const auto& b : blocks)
      if (b.first <= t && t <= b.last) live += (b.bytes + alignment - 1) / alignment * alignment;
    most = std::max(most, live);
  }
  return most;
}

TEST(ArenaPlanner, BlocksOneAfterAnotherShareTheSameBytes) {
  const std::vector<BlockUse> chain{{256, 0, 1}, {128, 2, 3}, {512, 4, 5}, {64, 6, 7}};
  for (const auto& plan : {plan_greedy_by_size(chain), plan_greedy_by_breadth(chain)}) {
    EXPECT_EQ(plan.arena_bytes, 512) << strategy_name(plan.strategy);
    EXPECT_EQ(plan.offsets, (std::vector<std::int64_t>{0, 0, 0, 0}));
    EXPECT_EQ(check_plan(chain, plan), "");
  }
  EXPECT_EQ(live_bytes_lower_bound(chain), 512);
}

TEST(ArenaPlanner, BlocksLiveTogetherAreStacked) {
  const std::vector<BlockUse> together{{128, 0, 9}, {256, 1, 8}, {64, 2, 7}};
  const ArenaPlan plan = plan_greedy_by_size(together);
  EXPECT_EQ(plan.arena_bytes, 448);
  EXPECT_EQ(plan.lower_bound, 448);
  // Largest first: 256 at 0, 128 above it, 64 above both.
  EXPECT_EQ(plan.offsets, (std::vector<std::int64_t>{256, 0, 384}));
  EXPECT_EQ(check_plan(together, plan), "");
}

// A hand-made sequence whose optimum is its lower bound, 384: X and Z never meet, so they share
// the bottom 256 bytes, and Y, live with each, goes above them.
TEST(ArenaPlanner, BothStrategiesReachTheKnownOptimum) {
  const std::vector<BlockUse> blocks{{256, 0, 2}, {128, 1, 4}, {256, 3, 5}};
  EXPECT_EQ(live_bytes_lower_bound(blocks), 384);
  for (const auto& plan : {plan_greedy_by_size(blocks), plan_greedy_by_breadth(blocks)}) {
    EXPECT_EQ(plan.arena_bytes, 384) << strategy_name(plan.strategy);
    EXPECT_EQ(plan.offsets[0], plan.offsets[2]) << "X and Z reuse the same bytes";
    EXPECT_EQ(check_plan(blocks, plan), "");
  }
}

// On random sequences every plan is valid and at least the lower bound, neither strategy always
// wins, and the planner keeps the smaller arena.
TEST(ArenaPlanner, PlanArenaKeepsTheSmallerOfTheTwoStrategies) {
  std::mt19937 rng(3);
  int breadth_won = 0, size_won = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<BlockUse> blocks;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % 60);
      blocks.push_back({static_cast<std::int64_t>(1 + rng() % 5000), first,
                        first + static_cast<int>(rng() % 20)});
    }
    const ArenaPlan by_size = plan_greedy_by_size(blocks, kA);
    const ArenaPlan by_breadth = plan_greedy_by_breadth(blocks, kA);
    const ArenaPlan best = plan_arena(blocks, kA);
    ASSERT_EQ(check_plan(blocks, by_size, kA), "") << "trial " << trial;
    ASSERT_EQ(check_plan(blocks, by_breadth, kA), "") << "trial " << trial;
    EXPECT_EQ(best.arena_bytes, std::min(by_size.arena_bytes, by_breadth.arena_bytes));
    EXPECT_GE(best.arena_bytes, best.lower_bound) << "no plan beats the live bytes";
    EXPECT_EQ(best.lower_bound, most_live_bytes(blocks, kA)) << "trial " << trial;
    breadth_won += by_breadth.arena_bytes < by_size.arena_bytes;
    size_won += by_size.arena_bytes < by_breadth.arena_bytes;
  }
  // Neither strategy dominates (why the planner runs both).
  EXPECT_GT(breadth_won, 0);
  EXPECT_GT(size_won, 0);
}

TEST(ArenaPlanner, SizesAreRoundedToTheAlignment) {
  const std::vector<BlockUse> blocks{{1, 0, 1}, {65, 0, 1}, {0, 0, 1}};
  const ArenaPlan plan = plan_arena(blocks, 64);
  EXPECT_EQ(plan.lower_bound, 64 + 128);
  EXPECT_EQ(plan.arena_bytes, 192);
  for (auto offset : plan.offsets) EXPECT_EQ(offset % 64, 0);
  EXPECT_EQ(aligned_bytes(65, 64), 128);
  EXPECT_EQ(plan_arena({}).arena_bytes, 0);
}

TEST(ArenaPlanner, MalformedBlocksAndBadPlansAreReported) {
  EXPECT_THROW(plan_arena({{-1, 0, 1}}), std::invalid_argument);
  EXPECT_THROW(plan_arena({{8, 3, 2}}), std::invalid_argument);
  EXPECT_THROW(plan_arena({{8, 0, 1}}, 48), std::invalid_argument);
  const std::vector<BlockUse> blocks{{128, 0, 3}, {128, 2, 5}};
  ArenaPlan bad = plan_arena(blocks);
  bad.offsets = {0, 64};
  EXPECT_NE(check_plan(blocks, bad).find("live together"), std::string::npos);
  bad.offsets = {0, 256};
  EXPECT_NE(check_plan(blocks, bad).find("outside the arena"), std::string::npos);
}

}  // namespace
}  // namespace engram::memory

namespace engram::memory {
namespace {

// A recorded step's blocks: what is allocated and released within it, with its lifetime in event
// indices; what outlives it and releases of what came before are not the arena's.
TEST(ArenaPlanner, AStepsBlocksAreWhatItAllocatesAndReleases) {
  const std::vector<AllocationEvent> events{
      {1, 4096},   // 0: released at 3
      {2, 1024},   // 1: released at 2
      {2, -1024},  // 2
      {1, -4096},  // 3
      {9, -512},   // 4: made before the step
      {3, 2048},   // 5: outlives the step
      {4, 4096},   // 6: released at 7
      {4, -4096},  // 7
  };
  std::int64_t outliving = -1;
  const std::vector<BlockUse> blocks = step_blocks(events, &outliving);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].bytes, 4096);
  EXPECT_EQ(blocks[0].first, 0);
  EXPECT_EQ(blocks[0].last, 3);
  EXPECT_EQ(blocks[1].first, 1);
  EXPECT_EQ(blocks[1].last, 2);
  EXPECT_EQ(blocks[2].first, 6);
  EXPECT_EQ(blocks[2].last, 7);
  EXPECT_EQ(outliving, 2048);
  const ArenaPlan plan = plan_arena(blocks, 512);
  EXPECT_EQ(plan.lower_bound, 5120);
  EXPECT_EQ(plan.arena_bytes, 5120);  // the third block reuses the first's bytes
  EXPECT_EQ(check_plan(blocks, plan, 512), "");
  EXPECT_TRUE(step_blocks({}).empty());
}

}  // namespace
}  // namespace engram::memory
