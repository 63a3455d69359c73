// Tests of the slack analysis: ES/LS/slack of each swap-in on the step's dataflow graph, the
// chosen triggers and the simulated stalls, on small timelines worked out by hand (times in ms;
// "a-b" is an operation running from a to b). No torch: durations in, schedule out.
#include "memory/SlackAnalysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::memory {
namespace {

using Lists = std::vector<std::vector<int>>;

StepTimeline make_timeline(std::vector<double> forward, double head, std::vector<double> backward,
                           std::vector<double> swap_out, std::vector<double> swap_in) {
  StepTimeline t;
  t.forward_ms = std::move(forward);
  t.head_ms = head;
  t.backward_ms = std::move(backward);
  t.swap_out_ms = std::move(swap_out);
  t.swap_in_ms = std::move(swap_in);
  return t;
}

TEST(SlackAnalysisTest, NoSwappedUnitIsTheComputeChain) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({1, 2, 3}, 0.5, {4, 5, 6}, {0, 0, 0}, {0, 0, 0}));
  EXPECT_EQ(s.makespan_ms, 1 + 2 + 3 + 0.5 + 4 + 5 + 6);
  EXPECT_EQ(s.trigger, (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {}, {}, {}}));
  const std::vector<double> zeros(3, 0.0);
  EXPECT_EQ(s.earliest_start_ms, zeros);
  EXPECT_EQ(s.latest_start_ms, zeros);
  EXPECT_EQ(s.slack_ms, zeros);
  EXPECT_EQ(s.predicted_stall_ms, zeros);
}

TEST(SlackAnalysisTest, NoUnitsIsTheHeadAlone) {
  const SwapInSchedule s = schedule_swap_ins(make_timeline({}, 2.5, {}, {}, {}));
  EXPECT_EQ(s.makespan_ms, 2.5);
  EXPECT_TRUE(s.trigger.empty());
  EXPECT_EQ(s.prefetch_at, (Lists{{}}));
}

// The header's example: units 1 and 2 swapped. The forward waits for each unit's swap-out.
//   forward  F0 0-2, F1 2-5, SO1 5-7, F2 7-10 (waits 2 for SO1), SO2 10-12, H 12-13 (waits 2)
//   channel  SO1 5-7, SO2 10-12, SI2 12-14, SI1 14-16 (queued behind SI2)
//   backward B2 14-20 (waits for SI2 until 14), B1 20-26, B0 26-30: makespan 30
// Latest starts: B0 26, B1 20, B2 14; SI1 = LS(B1) - 2 = 18; SI2 = min(LS(B2), LS(SI1)) - 2 = 12.
//   SI1: ES 14, LS 18, slack 4.   SI2: ES 12, LS 12, slack 0.
// Trigger times: 3 (end of forward) 12, 2 (B2 begins) 14, 1 (B1 begins) 20.
//   unit 2: trigger 2 at 14 > 12, trigger 3 at 12 <= 12: trigger 3.
//   unit 1: trigger 1 at 20 > 18, trigger 2 at 14 <= 18: trigger 2.
// Simulation: SI2 starts max(12, channel free 12, SO2 done 12) = 12, ends 14; B2 is ready when
// the head ends (13) and waits 1 (the graph's ES(B2) = 14 already includes that wait); SI1 starts
// max(13, 14, 7) = 14, ends 16 < 20, when B1 is ready: no wait.
TEST(SlackAnalysisTest, WorkedThreeUnitExample) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({2, 3, 3}, 1, {4, 6, 6}, {0, 2, 2}, {0, 2, 2}));
  EXPECT_EQ(s.makespan_ms, 30);
  EXPECT_EQ(s.earliest_start_ms, (std::vector<double>{0, 14, 12}));
  EXPECT_EQ(s.latest_start_ms, (std::vector<double>{0, 18, 12}));
  EXPECT_EQ(s.slack_ms, (std::vector<double>{0, 4, 0}));
  EXPECT_EQ(s.trigger, (std::vector<int>{-1, 2, 3}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {}, {1}, {2}}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(s.forward_wait_ms, (std::vector<double>{0, 2, 2}));
}

// Unit 0 swapped; the graph lets SI0 start right after SO0, during forward, which no trigger can.
//   F0 0-1, SO0 1-2, F1 2-12 (waits 1), H 12-13, B1 13-14, B0 14-15; SI0 ES 2: makespan 15.
//   LS(SI0) = LS(B0) - 5 = 9, slack 7. Trigger times: 2 at 12, 1 at 13, 0 at 14; all > 9.
// So trigger 2 (n); SI0 runs 12-17 and B0, which could start at 14, waits 3.
TEST(SlackAnalysisTest, TransferTooLongToHideStalls) {
  const SwapInSchedule s = schedule_swap_ins(make_timeline({1, 10}, 1, {1, 1}, {1, 0}, {5, 0}));
  EXPECT_EQ(s.makespan_ms, 15);
  EXPECT_EQ(s.earliest_start_ms[0], 2);
  EXPECT_EQ(s.latest_start_ms[0], 9);
  EXPECT_EQ(s.slack_ms[0], 7);
  EXPECT_EQ(s.trigger, (std::vector<int>{2, -1}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {}, {0}}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{3, 0}));
  EXPECT_EQ(s.forward_wait_ms, (std::vector<double>{1, 0}));
}

// When the transfers are on the critical path the graph makes the compute wait for them (the
// makespan grows): the forward for the swap-out, B_i for the swap-in, which the simulation
// reports as a stall.
//   F0 0-2, SO0 2-12, H 12-13 (waits 10), SI0 12-22, B0 22-26: makespan 26;
//   LS(SI0) = 22 - 10 = 12 = ES. Trigger 1 (end of forward, at 12) is the only one early enough;
//   SI0 runs 12-22; B0 is ready at 13 and waits 9.
TEST(SlackAnalysisTest, CriticalTransferStallsAndLengthensTheMakespan) {
  const SwapInSchedule s = schedule_swap_ins(make_timeline({2}, 1, {4}, {10}, {10}));
  EXPECT_EQ(s.makespan_ms, 26);
  EXPECT_EQ(s.earliest_start_ms[0], 12);
  EXPECT_EQ(s.latest_start_ms[0], 12);
  EXPECT_EQ(s.slack_ms[0], 0);
  EXPECT_EQ(s.trigger, (std::vector<int>{1}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{9}));
  EXPECT_EQ(s.forward_wait_ms, (std::vector<double>{10}));
}

// Units 0 and 1 swapped, short transfers.
//   F0 0-2, SO0 2-3, F1 3-5, SO1 5-6, F2 6-8, H 8-10, B2 10-14, B1 14-18, B0 18-22: makespan 22
//   (compute and the forward's two 1 ms waits); SI1 6-7, SI0 7-8.
//   LS: SI0 = LS(B0) - 1 = 17; SI1 = min(LS(B1) 14, LS(SI0) 17) - 1 = 13.
//   Trigger times: 3 at 8, 2 at 10, 1 at 14, 0 at 18.
//   unit 1: trigger 1 at 14 > 13, trigger 2 at 10 <= 13: trigger 2 (B2 begins).
//   unit 0: trigger 0 at 18 > 17, trigger 1 at 14 <= 17: trigger 1 (B1 begins).
// Simulation: SI1 10-11 (B1 at 14), SI0 14-15 (B0 at 18): both hidden.
TEST(SlackAnalysisTest, HiddenTransfersGetTheLatestTrigger) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({2, 2, 2}, 2, {4, 4, 4}, {1, 1, 0}, {1, 1, 0}));
  EXPECT_EQ(s.makespan_ms, 22);
  EXPECT_EQ(s.earliest_start_ms, (std::vector<double>{7, 6, 0}));
  EXPECT_EQ(s.latest_start_ms, (std::vector<double>{17, 13, 0}));
  EXPECT_EQ(s.slack_ms, (std::vector<double>{10, 7, 0}));
  EXPECT_EQ(s.trigger, (std::vector<int>{1, 2, -1}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {0}, {1}, {}}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(s.forward_wait_ms, (std::vector<double>{1, 1, 0}));
}

// A unit with only a swap-out is swapped too; its zero-length swap-in can wait for its own
// backward: F1 2-4, SO1 4-5, F2 5-7, H 7-9, B2 9-13, so LS(SI1) = LS(B1) = 13 = ES(B1): trigger 1.
TEST(SlackAnalysisTest, UnitWithOnlyASwapOutIsSwapped) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({2, 2, 2}, 2, {4, 4, 4}, {0, 1, 0}, {0, 0, 0}));
  EXPECT_EQ(s.trigger, (std::vector<int>{-1, 1, -1}));
  EXPECT_EQ(s.earliest_start_ms[1], 5);
  EXPECT_EQ(s.latest_start_ms[1], 13);
  EXPECT_EQ(s.predicted_stall_ms[1], 0);
  EXPECT_EQ(s.forward_wait_ms[1], 1);
}

// The channel is serial: SI0 queues behind SI1, so SI1 must end before SI0's latest start.
// Unit 1 alone: F0 0-1, F1 1-2, SO1 2-3, F2 3-4, H 4-5, B2 5-7, B1 7-9, B0 9-11; SI1 3-4.
//   LS(SI1) = LS(B1) - 1 = 6, slack 3; trigger times 3 at 4, 2 at 5, 1 at 7: trigger 2 (5 <= 6).
// With unit 0 swapped too: F0 0-1, SO0 1-2, F1 2-3, SO1 3-4, F2 4-5, H 5-6, B2 6-8, B1 8-10,
// B0 10-12; SI1 4-5, SI0 5-9. Trigger times 3 at 5, 2 at 6, 1 at 8, 0 at 10.
//   LS(SI0) = LS(B0) - 4 = 6; LS(SI1) = min(LS(B1) 8, LS(SI0) 6) - 1 = 5, slack 1;
//   unit 1: trigger 2 at 6 > 5, trigger 3 at 5 <= 5: trigger 3.
//   unit 0: trigger 1 at 8 > 6, trigger 2 at 6 <= 6: trigger 2.
//   Simulation: SI1 5-6 (B1 at 8), SI0 starts max(6, 6, 2) = 6, ends 10 = ES(B0): no wait.
TEST(SlackAnalysisTest, SerialChannelMovesTheEarlierNeededSwapInEarlier) {
  const SwapInSchedule alone =
      schedule_swap_ins(make_timeline({1, 1, 1}, 1, {2, 2, 2}, {0, 1, 0}, {0, 1, 0}));
  EXPECT_EQ(alone.earliest_start_ms[1], 3);
  EXPECT_EQ(alone.latest_start_ms[1], 6);
  EXPECT_EQ(alone.slack_ms[1], 3);
  EXPECT_EQ(alone.trigger, (std::vector<int>{-1, 2, -1}));

  const SwapInSchedule both =
      schedule_swap_ins(make_timeline({1, 1, 1}, 1, {2, 2, 2}, {1, 1, 0}, {4, 1, 0}));
  EXPECT_EQ(both.makespan_ms, 12);
  EXPECT_EQ(both.earliest_start_ms, (std::vector<double>{5, 4, 0}));
  EXPECT_EQ(both.latest_start_ms, (std::vector<double>{6, 5, 0}));
  EXPECT_EQ(both.slack_ms, (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(both.trigger, (std::vector<int>{2, 3, -1}));
  EXPECT_EQ(both.prefetch_at, (Lists{{}, {}, {0}, {1}}));
  EXPECT_EQ(both.predicted_stall_ms, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(both.forward_wait_ms, (std::vector<double>{1, 1, 0}));
}

/// Expects schedule_swap_ins(t) to throw std::invalid_argument whose message contains `names`.
void expect_invalid(const StepTimeline& t, const std::string& names) {
  try {
    schedule_swap_ins(t);
    ADD_FAILURE() << "no exception; expected one naming " << names;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(SlackAnalysisTest, InvalidInputThrows) {
  const StepTimeline good = make_timeline({1, 1}, 1, {1, 1}, {0, 1}, {0, 1});
  EXPECT_NO_THROW(schedule_swap_ins(good));

  StepTimeline t = good;
  t.backward_ms.pop_back();
  expect_invalid(t, "backward_ms");
  t = good;
  t.swap_out_ms.push_back(0);
  expect_invalid(t, "swap_out_ms");
  t = good;
  t.swap_in_ms.clear();
  expect_invalid(t, "swap_in_ms");

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  t = good;
  t.forward_ms[1] = -1;
  expect_invalid(t, "forward_ms[1]");
  t = good;
  t.backward_ms[0] = nan;
  expect_invalid(t, "backward_ms[0]");
  t = good;
  t.swap_in_ms[1] = inf;
  expect_invalid(t, "swap_in_ms[1]");
  t = good;
  t.swap_out_ms[0] = -0.5;
  expect_invalid(t, "swap_out_ms[0]");
  t = good;
  t.head_ms = nan;
  expect_invalid(t, "head_ms");
}

/// A deterministic timeline of `n` units: durations in whole and half milliseconds, about half
/// the units swapped, from a small linear congruential generator (portable, unlike <random>'s
/// distributions).
StepTimeline pseudo_random_timeline(int n, std::uint32_t seed) {
  std::uint32_t state = seed * 2654435761u + 1;
  const auto next = [&state](int bound) {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>((state >> 8) % static_cast<std::uint32_t>(bound));
  };
  StepTimeline t;
  t.head_ms = 0.5 * next(8);
  for (int i = 0; i < n; ++i) {
    t.forward_ms.push_back(0.5 * next(10));
    t.backward_ms.push_back(0.5 * next(20));
    const bool swapped = next(2) == 0;
    t.swap_out_ms.push_back(swapped ? 0.5 * next(12) : 0.0);
    t.swap_in_ms.push_back(swapped ? 0.5 * next(12) : 0.0);
  }
  return t;
}

TEST(SlackAnalysisTest, PrefetchAtIsTheInverseOfTrigger) {
  for (std::uint32_t seed = 0; seed < 200; ++seed) {
    const int n = 1 + static_cast<int>(seed % 9);
    const StepTimeline t = pseudo_random_timeline(n, seed);
    const SwapInSchedule s = schedule_swap_ins(t);
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_EQ(s.trigger.size(), static_cast<std::size_t>(n));
    ASSERT_EQ(s.prefetch_at.size(), static_cast<std::size_t>(n + 1));

    // Each list decreases and names only units whose trigger is that list's index.
    std::vector<int> seen(n, 0);
    for (int trigger = 0; trigger <= n; ++trigger) {
      const std::vector<int>& units = s.prefetch_at[trigger];
      for (std::size_t k = 0; k < units.size(); ++k) {
        const int unit = units[k];
        ASSERT_GE(unit, 0);
        ASSERT_LT(unit, n);
        EXPECT_EQ(s.trigger[unit], trigger);
        if (k > 0) {
          EXPECT_GT(units[k - 1], unit);
        }
        ++seen[unit];
      }
    }
    // Every swapped unit appears exactly once, at a trigger in [i, n]; the others nowhere.
    for (int i = 0; i < n; ++i) {
      const bool swapped = t.swap_out_ms[i] > 0 || t.swap_in_ms[i] > 0;
      EXPECT_EQ(seen[i], swapped ? 1 : 0) << "unit " << i;
      if (swapped) {
        EXPECT_GE(s.trigger[i], i);
        EXPECT_LE(s.trigger[i], n);
        EXPECT_GE(s.slack_ms[i], 0);
      } else {
        EXPECT_EQ(s.trigger[i], -1);
      }
    }
  }
}

}  // namespace
}  // namespace engram::memory
