#include "datasets/SortTask.h"

#include "tests/datasets/TraceReplay.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace engram::datasets {
namespace {

using testing::replays;
using testing::TraceStats;

constexpr int kBlank = SortTask::kBlank;
constexpr int kLeft = 0, kRight = 1;

void ptr(Environment& env, int pointer, int dir) { env.act(SortTask::kPtr, {pointer, dir, 0}); }
void swap(Environment& env, int p, int q) { env.act(SortTask::kSwap, {p, q, 0}); }

class SortTaskTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Task& task() const { return task_by_name(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(BothVariants, SortTaskTest, ::testing::Values("sort", "sort-recursive"),
                         [](const auto& info) {
                           return info.param == "sort" ? std::string("Iterative")
                                                       : std::string("Recursive");
                         });

TEST(SortEnvironment, AllPointersStartOnTheFirstElement) {
  auto env = task_by_name("sort").make_environment("3,1,2");
  EXPECT_EQ(env->length(), 3);
  EXPECT_EQ(env->observe(), (std::vector<int>{3, 3, 3}));
  EXPECT_EQ(env->result(), "3,1,2");
}

TEST(SortEnvironment, PtrMovesOnePointerOverTheArrayAndOneCellBeyondEachEnd) {
  auto env = task_by_name("sort").make_environment("3,1,2");
  ptr(*env, 1, kRight);
  EXPECT_EQ(env->observe(), (std::vector<int>{3, 1, 3}));
  ptr(*env, 1, kRight);
  EXPECT_EQ(env->observe()[1], 2);
  ptr(*env, 1, kRight);  // position n: off the array, seen as blank
  EXPECT_EQ(env->observe()[1], kBlank);
  EXPECT_THROW(ptr(*env, 1, kRight), ActError) << "position n+1 is out of bounds";
  EXPECT_EQ(env->observe()[1], kBlank) << "a failed PTR must not move the pointer";
  ptr(*env, 1, kLeft);
  EXPECT_EQ(env->observe()[1], 2);

  ptr(*env, 0, kLeft);  // position -1
  EXPECT_EQ(env->observe(), (std::vector<int>{kBlank, 2, 3}));
  EXPECT_THROW(ptr(*env, 0, kLeft), ActError) << "position -2 is out of bounds";
  ptr(*env, 0, kRight);
  EXPECT_EQ(env->observe()[0], 3);
}

TEST(SortEnvironment, SwapExchangesTheValuesUnderTwoPointers) {
  auto env = task_by_name("sort").make_environment("3,1,2");
  ptr(*env, 1, kRight);
  swap(*env, 0, 1);
  EXPECT_EQ(env->result(), "1,3,2");
  EXPECT_EQ(env->observe(), (std::vector<int>{1, 3, 1}));
  ptr(*env, 2, kRight);
  ptr(*env, 2, kRight);
  swap(*env, 2, 0);
  EXPECT_EQ(env->result(), "2,3,1");
}

TEST(SortEnvironment, SwapWithAPointerOffTheArrayIsAnActError) {
  auto env = task_by_name("sort").make_environment("3,1,2");
  ptr(*env, 0, kLeft);
  EXPECT_THROW(swap(*env, 0, 1), ActError);
  EXPECT_THROW(swap(*env, 1, 0), ActError);
  for (int i = 0; i < 3; ++i) ptr(*env, 2, kRight);  // 0 -> 3 = n
  EXPECT_THROW(swap(*env, 1, 2), ActError);
  EXPECT_EQ(env->result(), "3,1,2") << "failed SWAPs change nothing";
}

TEST(SortEnvironment, InvalidActsAreActErrors) {
  auto env = task_by_name("sort").make_environment("3,1,2");
  EXPECT_THROW(ptr(*env, 3, kRight), ActError);
  EXPECT_THROW(ptr(*env, -1, kRight), ActError);
  EXPECT_THROW(swap(*env, 0, 3), ActError);
  EXPECT_THROW(swap(*env, 3, 0), ActError);
  EXPECT_THROW(env->act(SortTask::kBubble, {0, 0, 0}), ActError);
  EXPECT_EQ(env->observe(), (std::vector<int>{3, 3, 3}));
  EXPECT_EQ(env->result(), "3,1,2");
}

TEST_P(SortTaskTest, SolveSortsDigits) {
  EXPECT_EQ(task().solve("3,1,2"), "1,2,3");
  EXPECT_EQ(task().solve(" 3, 1 ,2 "), "1,2,3");
  EXPECT_EQ(task().solve("5"), "5");
  EXPECT_EQ(task().solve("9,9,0,0,5"), "0,0,5,9,9");
}

TEST_P(SortTaskTest, MalformedInputsAreInputErrors) {
  for (const std::string bad :
       {"3,,1", "12,3", "", ",", "3,1,", ",3", "a,b", "3;1", "-1,2", "3 1", "1.5,2"}) {
    EXPECT_THROW(task().make_environment(bad), InputError) << "'" << bad << "'";
    EXPECT_THROW(task().solve(bad), InputError) << "'" << bad << "'";
    EXPECT_THROW(task().teach(bad), InputError) << "'" << bad << "'";
  }
  ENGRAM_EXPECT_THROW_WITH(task().make_environment("12,3"), UsageError, "'12,3'");
}

TEST_P(SortTaskTest, RandomInputHasTheRequestedLength) {
  std::mt19937_64 rng(3);
  for (int length = 1; length <= 30; ++length) {
    const std::string input = task().random_input(length, rng);
    EXPECT_EQ(input.size(), static_cast<std::size_t>(2 * length - 1)) << input;
    EXPECT_EQ(task().make_environment(input)->length(), length) << input;
  }
  EXPECT_THROW(task().random_input(0, rng), InputError);
  EXPECT_EQ(task().min_length(), 2);
}

TEST_P(SortTaskTest, TeacherMatchesGroundTruthOnRandomInputsOfManyLengths) {
  std::mt19937_64 rng(1);
  std::vector<std::string> inputs{"5", "0,0", "1,0", "9,8,7,6,5,4,3,2,1,0", "3,3,3"};
  for (int length = 2; length <= 12; ++length) {
    for (int i = 0; i < 10; ++i) inputs.push_back(task().random_input(length, rng));
  }
  for (int length : {20, 30}) inputs.push_back(task().random_input(length, rng));
  for (const auto& input : inputs) {
    const Trace trace = task().teach(input);
    ASSERT_EQ(trace.output, task().solve(input)) << input;
    ASSERT_TRUE(replays(task(), trace));
  }
}

TEST_P(SortTaskTest, DefaultLimitsLetTheReferenceProgramFinish) {
  std::mt19937_64 rng(5);
  for (int length = 1; length <= 25; ++length) {
    const std::string input = task().random_input(length, rng);
    TraceStats stats;
    ASSERT_TRUE(replays(task(), task().teach(input), &stats));
    const Limits limits = task().default_limits(length);
    EXPECT_LE(stats.total_steps, limits.max_steps) << input;
    EXPECT_LE(stats.max_depth, limits.max_depth) << input;
  }
}

TEST_P(SortTaskTest, FormatArgsNumbersPointersFromOne) {
  EXPECT_EQ(task().format_args(SortTask::kPtr, {1, kRight, 0}), "2, RIGHT");
  EXPECT_EQ(task().format_args(SortTask::kPtr, {0, kLeft, 0}), "1, LEFT");
  EXPECT_EQ(task().format_args(SortTask::kSwap, {0, 1, 0}), "1, 2");
  EXPECT_EQ(task().format_args(SortTask::kBstep, {0, 0, 0}), "");
}

TEST(SortRecursiveTeacher, EveryInvocationHasBoundedLength) {
  const auto& task = task_by_name("sort-recursive");
  std::mt19937_64 rng(4);
  for (int length : {2, 3, 5, 10, 20, 40}) {
    TraceStats stats;
    ASSERT_TRUE(replays(task, task.teach(task.random_input(length, rng)), &stats));
    EXPECT_LE(stats.max_invocation_steps, 5u) << "length " << length;
  }
}

TEST(SortIterativeTeacher, InvocationsGrowWithTheLength) {
  // The contrast to the recursive variant: BUBBLE loops over the whole array in one invocation.
  const auto& task = task_by_name("sort");
  std::mt19937_64 rng(4);
  TraceStats stats;
  ASSERT_TRUE(replays(task, task.teach(task.random_input(20, rng)), &stats));
  EXPECT_GT(stats.max_invocation_steps, 20u);
}

TEST(SortTeachers, IterativeAndRecursiveActAlike) {
  // Both are the same bubble sort: the same ACTs in the same order, only the call structure
  // differs.
  const auto& iterative = task_by_name("sort");
  const auto& recursive = task_by_name("sort-recursive");
  auto acts = [](const Task& task, const std::string& input) {
    std::vector<Call> out;
    for (const auto& call : call_sequence(task.teach(input), task.programs())) {
      if (task.programs()[call.program].is_act) out.push_back({call.program, call.args, 0});
    }
    return out;
  };
  std::mt19937_64 rng(9);
  for (int length = 2; length <= 10; ++length) {
    const std::string input = iterative.random_input(length, rng);
    const auto a = acts(iterative, input);
    EXPECT_FALSE(a.empty());
    EXPECT_TRUE(a == acts(recursive, input)) << input;
  }
}

TEST(SortIterativeTeacher, CallSequenceOfTwoOne) {
  // Hand-checked: "2,1" takes two passes; the first swaps.
  const auto& task = task_by_name("sort");
  const Trace trace = task.teach("2,1");
  EXPECT_EQ(trace.output, "1,2");
  enum { BUBBLESORT, BUBBLE, RESET, BSTEP, COMPSWAP, LSHIFT, RSHIFT, PTR, SWAP };
  const Args p1l{0, kLeft, 0}, p1r{0, kRight, 0}, p2l{1, kLeft, 0}, p2r{1, kRight, 0},
      p3r{2, kRight, 0}, none{0, 0, 0};
  auto pass = [&](bool swaps) {
    std::vector<Call> calls{
        {BUBBLE, none, 1}, {PTR, p2r, 2}, {BSTEP, none, 2}, {COMPSWAP, none, 3}};
    if (swaps) calls.push_back({SWAP, {0, 1, 0}, 4});
    for (const Call& c : std::vector<Call>{{RSHIFT, none, 3},
                                           {PTR, p1r, 4},
                                           {PTR, p2r, 4},
                                           {RESET, none, 1},
                                           {LSHIFT, none, 2},
                                           {PTR, p1l, 3},
                                           {PTR, p2l, 3},
                                           {LSHIFT, none, 2},
                                           {PTR, p1l, 3},
                                           {PTR, p2l, 3},
                                           {PTR, p1r, 2},
                                           {PTR, p3r, 2}}) {
      calls.push_back(c);
    }
    return calls;
  };
  std::vector<Call> expected{{BUBBLESORT, none, 0}};
  for (const auto& c : pass(true)) expected.push_back(c);
  for (const auto& c : pass(false)) expected.push_back(c);
  const auto calls = call_sequence(trace, task.programs());
  ASSERT_EQ(calls.size(), expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(calls[k], expected[k]) << "call " << k << ": got program " << calls[k].program;
  }
}

}  // namespace
}  // namespace engram::datasets
