#include "memory/detail/ReuseSequence.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace engram::memory::detail {
namespace {

/// A stand-in arena: only its addresses matter (the sequence never touches the bytes).
std::vector<char> g_arena(1 << 16);
char* const kArena = g_arena.data();

/// Heap blocks: distinct addresses outside the arena.
std::vector<char> g_heap(1 << 10);
const void* heap_block(int i) { return g_heap.data() + i; }

/// One allocation: placed, then bound to its block (arena or heap); returns the block.
const void* take(ReuseSequence& seq, std::int64_t bytes, int heap_id, std::int64_t* offset) {
  const auto at = seq.allocate(bytes);
  *offset = at.offset;
  const void* block = at.offset >= 0 ? kArena + at.offset : heap_block(heap_id);
  seq.bind(at.index, block);
  return block;
}

/// Releases a block, vacating its arena bytes at once (the host's rule).
void give(ReuseSequence& seq, const void* block) {
  const std::int64_t offset = seq.released(block, kArena);
  if (offset >= 0) seq.vacate(offset);
}

/// The recorded step: a and b live together, then a freed, c allocated and everything freed but
/// `kept`, which outlives the step.
struct Step {
  std::int64_t a = -1, b = -1, c = -1, kept = -1;
};
Step run_step(ReuseSequence& seq, std::uint64_t signature, std::int64_t c_bytes = 1024) {
  Step s;
  seq.begin(signature);
  const void* a = take(seq, 1024, 1, &s.a);
  const void* b = take(seq, 2048, 2, &s.b);
  give(seq, a);
  const void* c = take(seq, c_bytes, 3, &s.c);
  take(seq, 100, 4, &s.kept);
  give(seq, b);
  give(seq, c);
  return s;
}

void grow(ReuseSequence& seq) {
  if (const std::int64_t bytes = seq.growth()) seq.set_capacity(bytes);
}

TEST(ReuseSequenceTest, AServedStepTakesItsPlannedOffsetsAndLeavesWhatOutlivedTheStepAlone) {
  ReuseSequence seq(512);
  const Step recorded = run_step(seq, 7);
  EXPECT_EQ(recorded.a, -1) << "the first step is recorded, on the ordinary allocator";
  const ReuseStep first = seq.end();
  EXPECT_TRUE(first.recorded);
  EXPECT_EQ(first.allocations, 4);
  EXPECT_EQ(first.heap, 4);
  // a (1024) and b (2048) live together; c (1024) reuses a's bytes: 3072 = the lower bound.
  EXPECT_EQ(first.lower_bound, 3072);
  EXPECT_EQ(first.arena_bytes, 3072);
  grow(seq);
  ASSERT_EQ(seq.capacity(), 3072);

  const Step served = run_step(seq, 7);
  const ReuseStep second = seq.end();
  EXPECT_FALSE(second.recorded);
  EXPECT_FALSE(second.missed);
  EXPECT_EQ(second.hits, 3);
  EXPECT_EQ(second.heap, 1);
  EXPECT_EQ(served.kept, -1) << "outlived the recorded step: the ordinary allocator";
  EXPECT_EQ(served.c, served.a) << "c is planned on a's bytes, free again when c comes";
  EXPECT_NE(served.b, served.a);
  EXPECT_EQ(served.a % 512, 0);
  EXPECT_EQ(served.b % 512, 0);
  EXPECT_TRUE(seq.idle());
}

TEST(ReuseSequenceTest, BytesNotYetVacatedAreAConflictUntilTheyAre) {
  // On a device, a block another stream used keeps its bytes until that stream is past it.
  ReuseSequence seq(512);
  run_step(seq, 1);
  seq.end();
  grow(seq);

  seq.begin(1);
  std::int64_t a = -1, b = -1, c = -1, kept = -1;
  const void* block_a = take(seq, 1024, 1, &a);
  const void* block_b = take(seq, 2048, 2, &b);
  ASSERT_GE(a, 0);
  EXPECT_EQ(seq.released(block_a, kArena), a) << "a's lifetime ends; its bytes stay taken";
  const void* block_c = take(seq, 1024, 3, &c);
  EXPECT_EQ(c, -1) << "a's bytes were not vacated: c gets bytes of its own";
  seq.vacate(a);
  take(seq, 100, 4, &kept);
  give(seq, block_b);
  give(seq, block_c);
  const ReuseStep step = seq.end();
  EXPECT_EQ(step.conflicts, 1);
  EXPECT_EQ(step.hits, 2);
  EXPECT_FALSE(step.missed) << "a conflict keeps the plan";
  EXPECT_TRUE(seq.idle());

  // Vacated now: the next step is served whole again.
  const Step again = run_step(seq, 1);
  EXPECT_EQ(seq.end().hits, 3);
  EXPECT_EQ(again.c, again.a);
}

TEST(ReuseSequenceTest, AnotherSequenceMissesFromWhereItDiffersAndBecomesThePlan) {
  ReuseSequence seq(512);
  run_step(seq, 2);
  seq.end();
  grow(seq);
  const Step other = run_step(seq, 2, /*c_bytes=*/4096);
  const ReuseStep missed = seq.end();
  EXPECT_TRUE(missed.missed);
  EXPECT_TRUE(missed.replanned);
  EXPECT_GE(other.a, 0) << "served until the sequence differs";
  EXPECT_EQ(other.c, -1);
  EXPECT_EQ(missed.hits, 2);
  EXPECT_EQ(missed.heap, 2);
  EXPECT_EQ(missed.arena_bytes, 2048 + 4096) << "b and the larger c live together";
  grow(seq);
  const Step served = run_step(seq, 2, 4096);
  const ReuseStep step = seq.end();
  EXPECT_FALSE(step.missed);
  EXPECT_EQ(step.hits, 3);
  EXPECT_GE(served.c, 0);

  // Fewer allocations than planned is another sequence too.
  seq.begin(2);
  std::int64_t a = -1;
  give(seq, take(seq, 1024, 1, &a));
  EXPECT_TRUE(seq.end().missed);
}

TEST(ReuseSequenceTest, AnArenaSmallerThanThePlanServesWhatFits) {
  // The arena could not grow (a device out of memory): allocations beyond it are conflicts.
  ReuseSequence seq(512);
  run_step(seq, 3);
  seq.end();
  seq.set_capacity(1024);
  const Step s = run_step(seq, 3);
  const ReuseStep step = seq.end();
  EXPECT_EQ(step.hits + step.conflicts, 3);
  EXPECT_GE(step.conflicts, 1);
  EXPECT_TRUE(s.a == -1 || s.a + 1024 <= 1024);
  EXPECT_TRUE(s.b == -1 || s.b + 2048 <= 1024);
}

TEST(ReuseSequenceTest, ASizeTheDeviceRefusedIsNotOfferedAgainUntilThePlansWantAnother) {
  // Every refusal of a device allocation makes the caching allocator give back its whole cache.
  ReuseSequence seq(512);
  EXPECT_EQ(seq.growth(), 0) << "no plan yet";
  run_step(seq, 4);
  seq.end();
  ASSERT_EQ(seq.growth(), 3072);
  seq.refuse_growth(3072);
  EXPECT_EQ(seq.growth(), 0);
  run_step(seq, 4);
  EXPECT_EQ(seq.end().hits, 0) << "no arena: nothing served";
  EXPECT_EQ(seq.growth(), 0) << "the same plan: the same refused size";
  run_step(seq, 5, /*c_bytes=*/4096);
  seq.end();
  EXPECT_EQ(seq.growth(), 2048 + 4096) << "a larger plan is tried";
  seq.set_capacity(seq.growth());
  EXPECT_EQ(seq.growth(), 0) << "as large as the largest plan";

  // Forgotten plans forget the refusal too: the same size is tried for a new plan.
  seq.set_capacity(0);
  seq.forget_plans();
  run_step(seq, 4);
  seq.end();
  EXPECT_EQ(seq.growth(), 3072);
  seq.refuse_growth(3072);
  seq.forget_plans();
  run_step(seq, 4);
  seq.end();
  EXPECT_EQ(seq.growth(), 3072);
}

TEST(ReuseSequenceTest, GrowReplacesTheArenaAndKeepsTheOneItHadWhenTheLargerIsRefused) {
  // An owner's memory that grants up to `limit` bytes; the calls in order.
  std::int64_t limit = 1 << 20;
  std::vector<std::int64_t> calls;  // -1: freed; n: n bytes asked for
  const auto free_arena = [&] { calls.push_back(-1); };
  const auto allocate_arena = [&](std::int64_t n) {
    calls.push_back(n);
    return n <= limit;
  };
  ReuseSequence seq(512);
  EXPECT_FALSE(seq.grow(free_arena, allocate_arena)) << "no plan, nothing to grow to";
  EXPECT_TRUE(calls.empty());
  run_step(seq, 6);
  seq.end();
  EXPECT_TRUE(seq.grow(free_arena, allocate_arena));
  EXPECT_EQ(calls, (std::vector<std::int64_t>{-1, 3072}));
  EXPECT_EQ(seq.capacity(), 3072);

  // A larger plan the memory refuses: the arena it had is asked for again and kept.
  limit = 4096;
  calls.clear();
  run_step(seq, 7, /*c_bytes=*/4096);
  seq.end();
  // Never while a step is open, even with none of the arena's bytes taken yet.
  seq.begin(10);
  EXPECT_EQ(seq.growth(), 0);
  EXPECT_FALSE(seq.grow(free_arena, allocate_arena));
  EXPECT_TRUE(calls.empty());
  seq.end();
  EXPECT_FALSE(seq.grow(free_arena, allocate_arena));
  EXPECT_EQ(calls, (std::vector<std::int64_t>{-1, 6144, 3072}));
  EXPECT_EQ(seq.capacity(), 3072);
  calls.clear();
  EXPECT_FALSE(seq.grow(free_arena, allocate_arena)) << "the refused size is not asked again";
  EXPECT_TRUE(calls.empty());

  // Refused, and the arena it had is refused too: there is none, and every plan's allocations
  // are conflicts.
  limit = 0;
  run_step(seq, 8, /*c_bytes=*/8192);
  seq.end();
  EXPECT_FALSE(seq.grow(free_arena, allocate_arena));
  EXPECT_EQ(seq.capacity(), 0);
  run_step(seq, 6);
  const ReuseStep step = seq.end();
  EXPECT_EQ(step.hits, 0);
  EXPECT_EQ(step.conflicts, 3);
}

TEST(ReuseSequenceTest, PlansBySignatureForeignCountsAndOrderOfCalls) {
  ReuseSequence seq(512);
  EXPECT_THROW(seq.allocate(8), std::logic_error);
  EXPECT_THROW(seq.end(), std::logic_error);
  run_step(seq, 10);
  EXPECT_THROW(seq.begin(11), std::logic_error);
  EXPECT_THROW(seq.forget_plans(), std::logic_error);
  seq.note_foreign();
  EXPECT_EQ(seq.end().foreign, 1);
  grow(seq);
  run_step(seq, 11);
  EXPECT_TRUE(seq.end().recorded) << "another signature has its own plan";
  EXPECT_EQ(seq.plans(), 2);

  seq.begin(10);
  std::int64_t a = -1;
  take(seq, 1024, 1, &a);
  ASSERT_GE(a, 0);
  EXPECT_THROW(seq.set_capacity(1 << 20), std::logic_error) << "arena bytes are taken";
  EXPECT_EQ(seq.released(heap_block(9), kArena), -1) << "a block outside the arena";
  seq.vacate(a);
  seq.end();

  seq.forget_plans();
  EXPECT_EQ(seq.plans(), 0);
  EXPECT_EQ(seq.wanted_capacity(), 0);
  run_step(seq, 10);
  EXPECT_TRUE(seq.end().recorded);
  EXPECT_THROW(ReuseSequence(48), std::invalid_argument);
}

}  // namespace
}  // namespace engram::memory::detail
