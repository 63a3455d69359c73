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

// The header's example: units 1 and 2 swapped.
//   forward  F0 0-2, F1 2-5, F2 5-8, H 8-9
//   channel  SO1 5-7, SO2 8-10 (after F2), SI2 10-12, SI1 12-14 (queued behind SI2)
//   backward B2 12-18 (waits for SI2 until 12), B1 18-24, B0 24-28: makespan 28
// Latest starts: B0 24, B1 18, B2 12; SI1 = LS(B1) - 2 = 16; SI2 = min(LS(B2), LS(SI1)) - 2 = 10.
//   SI1: ES 12, LS 16, slack 4.   SI2: ES 10, LS 10, slack 0.
// Trigger times: 3 (end of forward) 8, 2 (B2 begins) 12, 1 (B1 begins) 18.
//   unit 2: trigger 2 at 12 > 10, trigger 3 at 8 <= 10: trigger 3.
//   unit 1: trigger 1 at 18 > 16, trigger 2 at 12 <= 16: trigger 2.
// Simulation: SI2 starts max(8, channel free 10, SO2 done 10) = 10, ends 12; B2 is ready when
// the head ends (9) and waits 3 (the graph's ES(B2) = 12 already includes that wait); SI1 starts
// max(12, 12, 7) = 12, ends 14 < 18, when B1 is ready: no wait.
TEST(SlackAnalysisTest, WorkedThreeUnitExample) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({2, 3, 3}, 1, {4, 6, 6}, {0, 2, 2}, {0, 2, 2}));
  EXPECT_EQ(s.makespan_ms, 28);
  EXPECT_EQ(s.earliest_start_ms, (std::vector<double>{0, 12, 10}));
  EXPECT_EQ(s.latest_start_ms, (std::vector<double>{0, 16, 10}));
  EXPECT_EQ(s.slack_ms, (std::vector<double>{0, 4, 0}));
  EXPECT_EQ(s.trigger, (std::vector<int>{-1, 2, 3}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {}, {1}, {2}}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{0, 0, 3}));
}

// Unit 0 swapped; the graph lets SI0 start right after SO0, during forward, which no trigger can.
//   F0 0-1, F1 1-11, H 11-12, B1 12-13, B0 13-14; SO0 1-2, SI0 ES 2: makespan 14.
//   LS(SI0) = LS(B0) - 5 = 8, slack 6. Trigger times: 2 at 11, 1 at 12, 0 at 13; all > 8.
// So trigger 2 (n); SI0 runs 11-16 and B0, which could start at 13, waits 3.
TEST(SlackAnalysisTest, TransferTooLongToHideStalls) {
  const SwapInSchedule s = schedule_swap_ins(make_timeline({1, 10}, 1, {1, 1}, {1, 0}, {5, 0}));
  EXPECT_EQ(s.makespan_ms, 14);
  EXPECT_EQ(s.earliest_start_ms[0], 2);
  EXPECT_EQ(s.latest_start_ms[0], 8);
  EXPECT_EQ(s.slack_ms[0], 6);
  EXPECT_EQ(s.trigger, (std::vector<int>{2, -1}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {}, {0}}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{3, 0}));
}

// When the swap-in is on the critical path the graph makes B_i wait for it (the makespan grows)
// and the simulation reports the wait against the compute chain as a stall.
//   F0 0-2, H 2-3, SO0 2-12, SI0 12-22, B0 22-26: makespan 26; LS(SI0) = 22 - 10 = 12 = ES.
//   Trigger 1 (end of forward, at 2) is the only one early enough; SI0 runs 12-22 behind the
//   swap-out; B0 is ready at 3 and waits 19.
TEST(SlackAnalysisTest, CriticalTransferStallsAndLengthensTheMakespan) {
  const SwapInSchedule s = schedule_swap_ins(make_timeline({2}, 1, {4}, {10}, {10}));
  EXPECT_EQ(s.makespan_ms, 26);
  EXPECT_EQ(s.earliest_start_ms[0], 12);
  EXPECT_EQ(s.latest_start_ms[0], 12);
  EXPECT_EQ(s.slack_ms[0], 0);
  EXPECT_EQ(s.trigger, (std::vector<int>{1}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{19}));
}

// Units 0 and 1 swapped, short transfers.
//   F0 0-2, F1 2-4, F2 4-6, H 6-8, B2 8-12, B1 12-16, B0 16-20: makespan 20 (compute only)
//   SO0 2-3, SO1 4-5, SI1 5-6, SI0 6-7.
//   LS: SI0 = LS(B0) - 1 = 15; SI1 = min(LS(B1) 12, LS(SI0) 15) - 1 = 11.
//   Trigger times: 3 at 6, 2 at 8, 1 at 12, 0 at 16.
//   unit 1: trigger 1 at 12 > 11, trigger 2 at 8 <= 11: trigger 2 (B2 begins).
//   unit 0: trigger 0 at 16 > 15, trigger 1 at 12 <= 15: trigger 1 (B1 begins).
// Simulation: SI1 8-9 (B1 at 12), SI0 12-13 (B0 at 16): both hidden.
TEST(SlackAnalysisTest, HiddenTransfersGetTheLatestTrigger) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({2, 2, 2}, 2, {4, 4, 4}, {1, 1, 0}, {1, 1, 0}));
  EXPECT_EQ(s.makespan_ms, 20);
  EXPECT_EQ(s.earliest_start_ms, (std::vector<double>{6, 5, 0}));
  EXPECT_EQ(s.latest_start_ms, (std::vector<double>{15, 11, 0}));
  EXPECT_EQ(s.slack_ms, (std::vector<double>{9, 6, 0}));
  EXPECT_EQ(s.trigger, (std::vector<int>{1, 2, -1}));
  EXPECT_EQ(s.prefetch_at, (Lists{{}, {0}, {1}, {}}));
  EXPECT_EQ(s.predicted_stall_ms, (std::vector<double>{0, 0, 0}));
}

// A unit with only a swap-out is swapped too; its zero-length swap-in can wait for its own
// backward: LS(SI1) = LS(B1) = 12 = ES(B1), so trigger 1.
TEST(SlackAnalysisTest, UnitWithOnlyASwapOutIsSwapped) {
  const SwapInSchedule s =
      schedule_swap_ins(make_timeline({2, 2, 2}, 2, {4, 4, 4}, {0, 1, 0}, {0, 0, 0}));
  EXPECT_EQ(s.trigger, (std::vector<int>{-1, 1, -1}));
  EXPECT_EQ(s.earliest_start_ms[1], 5);
  EXPECT_EQ(s.latest_start_ms[1], 12);
  EXPECT_EQ(s.predicted_stall_ms[1], 0);
}

// The channel is serial: SI0 queues behind SI1, so SI1 must end before SI0's latest start.
//   F0 0-1, F1 1-2, F2 2-3, H 3-4, B2 4-6, B1 6-8, B0 8-10; trigger times 3 at 3, 2 at 4, 1 at 6.
// Unit 1 alone (SO1 2-3, SI1 3-4): LS(SI1) = LS(B1) - 1 = 5, slack 2; trigger 2 (4 <= 5).
// With unit 0 swapped too (SO0 1-2, SO1 2-3, SI1 3-4, SI0 4-8):
//   LS(SI0) = LS(B0) - 4 = 4; LS(SI1) = min(LS(B1) 6, LS(SI0) 4) - 1 = 3, slack 0;
//   unit 1: trigger 2 at 4 > 3, trigger 3 at 3 <= 3: trigger 3.
//   unit 0: trigger 1 at 6 > 4, trigger 2 at 4 <= 4: trigger 2.
//   Simulation: SI1 3-4 (B1 at 6), SI0 starts max(4, 4, 2) = 4, ends 8 = ES(B0): no wait.
TEST(SlackAnalysisTest, SerialChannelMovesTheEarlierNeededSwapInEarlier) {
  const SwapInSchedule alone =
      schedule_swap_ins(make_timeline({1, 1, 1}, 1, {2, 2, 2}, {0, 1, 0}, {0, 1, 0}));
  EXPECT_EQ(alone.earliest_start_ms[1], 3);
  EXPECT_EQ(alone.latest_start_ms[1], 5);
  EXPECT_EQ(alone.slack_ms[1], 2);
  EXPECT_EQ(alone.trigger, (std::vector<int>{-1, 2, -1}));

  const SwapInSchedule both =
      schedule_swap_ins(make_timeline({1, 1, 1}, 1, {2, 2, 2}, {1, 1, 0}, {4, 1, 0}));
  EXPECT_EQ(both.makespan_ms, 10);
  EXPECT_EQ(both.earliest_start_ms, (std::vector<double>{4, 3, 0}));
  EXPECT_EQ(both.latest_start_ms, (std::vector<double>{4, 3, 0}));
  EXPECT_EQ(both.slack_ms, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(both.trigger, (std::vector<int>{2, 3, -1}));
  EXPECT_EQ(both.prefetch_at, (Lists{{}, {}, {0}, {1}}));
  EXPECT_EQ(both.predicted_stall_ms, (std::vector<double>{0, 0, 0}));
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
