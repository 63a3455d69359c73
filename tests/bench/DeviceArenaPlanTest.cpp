#include "bench/MemoryBenchParts.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace engram::bench::detail {
namespace {

memory::MemoryEvent event(std::uint64_t allocation, std::int64_t bytes) {
  memory::MemoryEvent e;
  e.allocation = allocation;
  e.bytes = bytes;
  return e;
}

/// A step's window as the CUDA tracker records it: a and b live together, a freed, c while b
/// lives, b and c freed, the gradient d kept past the step, and the free of a tensor from
/// before the window.
memory::DeviceMemoryWindow step_window() {
  memory::DeviceMemoryWindow w;
  w.start_live_bytes = 10000;
  w.reserved_peak_bytes = 40960;
  w.events = {event(1, 1000), event(2, 2048), event(1, -1000), event(3, 512),
              event(2, -2048), event(3, -512), event(4, 4096),  event(99, -8192)};
  return w;
}

TEST(DeviceArenaPlanTest, TheArenaHoldsWhatTheStepReleasesAndTheStepWhatOutlivesItBeside) {
  const nlohmann::json plan = device_arena_plan(step_window());
  EXPECT_FALSE(plan["served"].get<bool>());
  EXPECT_EQ(plan["blocks"].get<int>(), 3) << "a, b and c; d outlives the step, 99 precedes it";
  // a (1000 bytes, 1024 in 512-byte blocks) and b live together; c fits where a was.
  EXPECT_EQ(plan["lower_bound_bytes"].get<std::int64_t>(), 1024 + 2048);
  EXPECT_EQ(plan["arena_bytes"].get<std::int64_t>(), 1024 + 2048);
  EXPECT_EQ(plan["outliving_bytes"].get<std::int64_t>(), 4096);
  EXPECT_EQ(plan["start_live_bytes"].get<std::int64_t>(), 10000);
  EXPECT_EQ(plan["arena_step_bytes"].get<std::int64_t>(), 10000 + 4096 + 3072);
  EXPECT_EQ(plan["reserved_peak_bytes"].get<std::int64_t>(), 40960);
  EXPECT_DOUBLE_EQ(plan["arena_step_vs_reserved_peak"].get<double>(),
                   (10000.0 + 4096 + 3072) / 40960.0);
}

TEST(DeviceArenaPlanTest, WithoutAReservedPeakTheRatioIsZeroNotInfinite) {
  memory::DeviceMemoryWindow w = step_window();
  w.reserved_peak_bytes = 0;
  EXPECT_EQ(device_arena_plan(w)["arena_step_vs_reserved_peak"].get<double>(), 0.0);
}

}  // namespace
}  // namespace engram::bench::detail
