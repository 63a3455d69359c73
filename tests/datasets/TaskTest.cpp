#include "datasets/Task.h"

#include "tests/support/TempDir.h"

#include <gtest/gtest.h>

#include <pthread.h>

#include <set>
#include <string>

namespace engram::datasets {
namespace {

TEST(TaskRegistry, EveryNameResolvesToTheTaskOfThatName) {
  const auto names = task_names();
  EXPECT_EQ(names,
            (std::vector<std::string>{"addition", "addition-primitive", "sort", "sort-recursive",
                                      "map", "filter", "fold", "zipwith", "scan"}));
  for (const auto& name : names) {
    const Task& task = task_by_name(name);
    EXPECT_EQ(task.name(), name);
    EXPECT_FALSE(task.input_help().empty());
    ASSERT_GE(task.root_program(), 0);
    ASSERT_LT(task.root_program(), static_cast<int>(task.programs().size()));
    EXPECT_FALSE(task.programs()[task.root_program()].is_act) << name;
    std::set<std::string> program_names;
    for (const auto& p : task.programs()) program_names.insert(p.name);
    EXPECT_EQ(program_names.size(), task.programs().size()) << "program names are unique";
  }
}

TEST(TaskRegistry, UnknownTaskIsAnInputErrorListingTheKnownTasks) {
  EXPECT_THROW(task_by_name("multiply"), InputError);
  EXPECT_THROW(task_by_name(""), InputError);
  EXPECT_THROW(task_by_name("Addition"), InputError) << "names are case-sensitive";
  ENGRAM_EXPECT_THROW_WITH(task_by_name("multiply"), UsageError, "'multiply'");
  ENGRAM_EXPECT_THROW_WITH(task_by_name("multiply"), InputError,
                           "addition, addition-primitive, sort, sort-recursive, map");
}

TEST(TaskRegistry, ProgramIndexFindsProgramsByName) {
  const Task& addition = task_by_name("addition");
  EXPECT_EQ(addition.program_index("ADD"), 0);
  EXPECT_EQ(addition.program_index("MOVE"), 5);
  EXPECT_TRUE(addition.programs()[addition.program_index("WRITE")].is_act);
  EXPECT_EQ(addition.program_index("BUBBLE"), -1);
  const Task& sort = task_by_name("sort");
  EXPECT_EQ(sort.program_index("SWAP"), 8);
  EXPECT_EQ(sort.program_index("ADD"), -1);
}

TEST(CallSequence, EmptyTraceHasNoCalls) {
  EXPECT_TRUE(call_sequence(Trace{}, task_by_name("addition").programs()).empty());
}

TEST(CallSequence, TruncatedTraceStopsWithoutReadingPastTheEnd) {
  const Task& task = task_by_name("addition");
  Trace trace = task.teach("5+7");
  const auto full = call_sequence(trace, task.programs());
  trace.invocations.resize(2);  // ADD and ADD1; the CARRY invocation is missing
  const auto calls = call_sequence(trace, task.programs());
  ASSERT_LT(calls.size(), full.size());
  ASSERT_GE(calls.size(), 4u);
  for (std::size_t k = 0; k < calls.size(); ++k) EXPECT_EQ(calls[k], full[k]) << k;
}

TEST(CallSequence, DeepRecursionDoesNotOverflowTheStack) {
  const Task& task = task_by_name("addition");
  const std::string digits(3000, '9');
  const Trace trace = task.teach(digits + "+1");
  EXPECT_EQ(trace.output, "1" + std::string(3000, '0'));
  const auto calls = call_sequence(trace, task.programs());
  int depth = 0;
  for (const auto& call : calls) depth = std::max(depth, call.depth);
  EXPECT_GT(depth, 3000);
}

TEST(TraceEquality, ReturnStepsIgnoreTheirUnusedCallee) {
  Step a{{1, 2}, true, -1, {0, 0, 0}};
  Step b{{1, 2}, true, 3, {1, 1, 1}};
  EXPECT_TRUE(a == b);
  b.observation = {1, 3};
  EXPECT_FALSE(a == b);
  Step c{{1, 2}, false, 3, {1, 0, 0}};
  Step d = c;
  EXPECT_TRUE(c == d);
  d.callee_args[2] = 1;
  EXPECT_FALSE(c == d);
}

}  // namespace
}  // namespace engram::datasets

namespace engram::datasets {
namespace {

// Reference programs recurse on the C++ stack: a 30000-digit addition used to overflow it (SIGSEGV)
// in `engram eval` and `engram data gen`. Past the bound they refuse with an InputError instead.
TEST(TeachLength, ProblemsPastTheBoundAreRefusedNotCrashed) {
  const Task& addition = task_by_name("addition");
  const std::string too_long = std::string(30000, '7') + "+1";
  EXPECT_THROW(addition.teach(too_long), InputError);
  std::mt19937_64 rng(1);
  EXPECT_THROW(addition.random_input(addition.max_teach_length() + 1, rng), InputError);
  const Task& sort = task_by_name("sort-recursive");
  EXPECT_THROW(sort.random_input(sort.max_teach_length() + 1, rng), InputError);
}

/// Runs `f` on a thread with a stack of `bytes`; a stack overflow crashes the test binary.
void on_small_stack(std::size_t bytes, void (*f)()) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* arg) -> void* {
                  reinterpret_cast<void (*)()>(arg)();
                  return nullptr;
                },
                reinterpret_cast<void*>(f)),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(TeachLength, TheLongestProblemsNeedNoDeepStack) {
  // A reference program's recursion in tail position (ADD calling ADD for the next column, ROOT
  // calling ROOT for the next element) runs in a loop, not a C++ frame per level: teaching the
  // longest problem fits in 256 KiB of stack. With a frame per level, 10,000 digits overflowed
  // the 8 MiB main stack under AddressSanitizer (scripts/sanitize.sh).
  static std::string output, expected;
  for (const char* name : {"addition", "map"}) {
    static const char* current;
    current = name;
    on_small_stack(256 << 10, [] {
      const Task& task = task_by_name(current);
      std::mt19937_64 rng(1);
      const std::string input = task.random_input(task.max_teach_length(), rng);
      output = task.teach(input).output;
      expected = task.solve(input);
    });
    EXPECT_EQ(output, expected) << name;
    EXPECT_FALSE(output.empty()) << name;
  }
}

TEST(TeachLength, TheBoundItselfRuns) {
  const Task& addition = task_by_name("addition");
  std::mt19937_64 rng(1);
  const std::string input = addition.random_input(addition.max_teach_length(), rng);
  EXPECT_EQ(addition.teach(input).output, addition.solve(input));
}

}  // namespace
}  // namespace engram::datasets
