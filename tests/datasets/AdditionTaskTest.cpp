#include "datasets/AdditionTask.h"

#include "datasets/ListTask.h"

#include "tests/datasets/TraceReplay.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace engram::datasets {
namespace {

using testing::replays;
using testing::TraceStats;

constexpr int kBlank = AdditionTask::kBlank;
constexpr int kIn1 = AdditionTask::kIn1, kIn2 = AdditionTask::kIn2;
constexpr int kCarry = AdditionTask::kCarryRow, kOut = AdditionTask::kOut;
constexpr int kLeft = 0, kRight = 1;

const Task& addition() { return task_by_name("addition"); }

void write(Environment& env, int row, int value) { env.act(AdditionTask::kWrite, {row, value, 0}); }
void move(Environment& env, int row, int dir) { env.act(AdditionTask::kMove, {row, dir, 0}); }

std::string random_number(int digits, std::mt19937_64& rng, bool leading_zero_ok) {
  std::uniform_int_distribution<int> digit(0, 9), lead(1, 9);
  std::string s;
  for (int i = 0; i < digits; ++i) {
    const bool first = i == 0 && digits > 1 && !leading_zero_ok;
    s += static_cast<char>('0' + (first ? lead(rng) : digit(rng)));
  }
  return s;
}

TEST(AdditionEnvironment, OperandsAreRightAlignedWithPointersOnTheLastColumn) {
  auto env = addition().make_environment("25+17");
  EXPECT_EQ(env->length(), 2);
  EXPECT_EQ(env->observe(), (std::vector<int>{5, 7, kBlank, kBlank}));
  move(*env, kIn1, kLeft);
  move(*env, kIn2, kLeft);
  EXPECT_EQ(env->observe(), (std::vector<int>{2, 1, kBlank, kBlank}));
  // Two more columns: the one for the final carry and the blank sentinel at column 0.
  move(*env, kIn1, kLeft);
  EXPECT_EQ(env->observe()[kIn1], kBlank);
  move(*env, kIn1, kLeft);
  EXPECT_EQ(env->observe()[kIn1], kBlank);
  EXPECT_THROW(move(*env, kIn1, kLeft), ActError);
}

TEST(AdditionEnvironment, UnequalOperandsArePaddedWithBlanks) {
  auto env = addition().make_environment("999+1");
  EXPECT_EQ(env->length(), 3);
  EXPECT_EQ(env->observe(), (std::vector<int>{9, 1, kBlank, kBlank}));
  move(*env, kIn1, kLeft);
  move(*env, kIn2, kLeft);
  EXPECT_EQ(env->observe(), (std::vector<int>{9, kBlank, kBlank, kBlank}));
}

TEST(AdditionEnvironment, WriteChangesOnlyTheCellUnderThePointer) {
  auto env = addition().make_environment("25+17");
  write(*env, kOut, 7);
  EXPECT_EQ(env->observe(), (std::vector<int>{5, 7, kBlank, 7}));
  move(*env, kOut, kLeft);
  EXPECT_EQ(env->observe()[kOut], kBlank);
  move(*env, kOut, kRight);
  EXPECT_EQ(env->observe()[kOut], 7);
  write(*env, kCarry, 1);
  write(*env, kIn1, 0);
  EXPECT_EQ(env->observe(), (std::vector<int>{0, 7, 1, 7}));
  write(*env, kOut, 3);  // overwrites
  EXPECT_EQ(env->observe()[kOut], 3);
}

TEST(AdditionEnvironment, PointersCannotLeaveTheScratchpad) {
  auto env = addition().make_environment("5+7");
  for (int row : {kIn1, kIn2, kCarry, kOut}) {
    EXPECT_THROW(move(*env, row, kRight), ActError) << "row " << row;
  }
  const auto before = env->observe();
  EXPECT_THROW(move(*env, kOut, kRight), ActError);
  EXPECT_EQ(env->observe(), before) << "a failed MOVE must not move the pointer";
}

TEST(AdditionEnvironment, InvalidActsAreActErrors) {
  auto env = addition().make_environment("25+17");
  EXPECT_THROW(write(*env, kOut, 10), ActError);
  EXPECT_THROW(write(*env, kOut, -1), ActError);
  EXPECT_THROW(write(*env, 4, 1), ActError);
  EXPECT_THROW(write(*env, -1, 1), ActError);
  EXPECT_THROW(move(*env, 4, kLeft), ActError);
  EXPECT_THROW(env->act(AdditionTask::kAdd, {0, 0, 0}), ActError);
  EXPECT_THROW(env->act(AdditionTask::kLshift, {0, 0, 0}), ActError);
  EXPECT_EQ(env->observe(), (std::vector<int>{5, 7, kBlank, kBlank}));
}

TEST(AdditionEnvironment, ResultReadsTheOutputRowWithoutLeadingZeros) {
  auto env = addition().make_environment("25+17");
  EXPECT_EQ(env->result(), "");
  write(*env, kOut, 0);
  EXPECT_EQ(env->result(), "0");
  move(*env, kOut, kLeft);
  write(*env, kOut, 0);
  EXPECT_EQ(env->result(), "0") << "\"00\" is zero";
  write(*env, kOut, 4);
  move(*env, kOut, kRight);
  write(*env, kOut, 2);
  move(*env, kOut, kLeft);
  move(*env, kOut, kLeft);
  write(*env, kOut, 0);
  move(*env, kOut, kLeft);
  write(*env, kOut, 0);
  EXPECT_EQ(env->result(), "42") << "row is 0042";
}

TEST(AdditionTask, SolveKnownSums) {
  const auto& task = addition();
  EXPECT_EQ(task.solve("25+17"), "42");
  EXPECT_EQ(task.solve("0+0"), "0");
  EXPECT_EQ(task.solve("999+1"), "1000");
  EXPECT_EQ(task.solve("1+999"), "1000");
  EXPECT_EQ(task.solve("5+7"), "12");
  EXPECT_EQ(task.solve("007+5"), "12");
  EXPECT_EQ(task.solve("000+000"), "0");
  EXPECT_EQ(task.solve(" 25 + 17 "), "42");
  EXPECT_EQ(task.solve("99999999999999999999+1"), "100000000000000000000");
}

TEST(AdditionTask, SolveAgreesWithMachineArithmetic) {
  const auto& task = addition();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> digits(1, 18);
  for (int i = 0; i < 500; ++i) {
    const std::string a = random_number(digits(rng), rng, true);
    const std::string b = random_number(digits(rng), rng, true);
    const unsigned long long sum = std::stoull(a) + std::stoull(b);
    ASSERT_EQ(task.solve(a + "+" + b), std::to_string(sum)) << a << "+" << b;
  }
}

TEST(AdditionTask, MalformedInputsAreInputErrors) {
  const auto& task = addition();
  for (const std::string bad :
       {"12+", "+12", "a+b", "1+2+3", "", "+", "12", "-1+2", "1 2+3", "1.5+2", "12+3x", "0x1+2"}) {
    EXPECT_THROW(task.make_environment(bad), InputError) << "'" << bad << "'";
    EXPECT_THROW(task.solve(bad), InputError) << "'" << bad << "'";
    EXPECT_THROW(task.teach(bad), InputError) << "'" << bad << "'";
  }
  // The message quotes the input and shows the notation, so the user can fix it.
  ENGRAM_EXPECT_THROW_WITH(task.make_environment("12+"), InputError, "'12+'");
  ENGRAM_EXPECT_THROW_WITH(task.make_environment("12+"), UsageError, "25+17");
}

TEST(AdditionTask, RandomInputHasTheRequestedLength) {
  const auto& task = addition();
  std::mt19937_64 rng(3);
  for (int length = 1; length <= 30; ++length) {
    for (int i = 0; i < 5; ++i) {
      const std::string input = task.random_input(length, rng);
      const auto plus = input.find('+');
      ASSERT_NE(plus, std::string::npos) << input;
      EXPECT_EQ(plus, static_cast<std::size_t>(length)) << input;
      EXPECT_EQ(input.size() - plus - 1, static_cast<std::size_t>(length)) << input;
      if (length > 1) {
        EXPECT_NE(input[0], '0') << input;
        EXPECT_NE(input[plus + 1], '0') << input;
      }
      EXPECT_EQ(task.make_environment(input)->length(), length);
    }
  }
  std::mt19937_64 a(11), b(11);
  EXPECT_EQ(task.random_input(20, a), task.random_input(20, b)) << "deterministic in the seed";
  EXPECT_THROW(task.random_input(0, rng), InputError);
}

TEST(AdditionTeacher, MatchesGroundTruthOnRandomInputsOfManyLengths) {
  const auto& task = addition();
  std::mt19937_64 rng(1);
  for (int length = 1; length <= 40; ++length) {
    for (int i = 0; i < 8; ++i) {
      const std::string input = task.random_input(length, rng);
      const Trace trace = task.teach(input);
      ASSERT_EQ(trace.input, input);
      ASSERT_EQ(trace.output, task.solve(input)) << input;
      ASSERT_TRUE(replays(task, trace));
    }
  }
}

TEST(AdditionTeacher, MatchesGroundTruthOnUnequalOperands) {
  const auto& task = addition();
  std::vector<std::string> inputs{"999+1", "1+999", "0+0",       "0+9",
                                  "9+0",   "5+7",   "99+99",     "1+99999999",
                                  "000+1", "10+0",  "0000+0000", "9999999+9999999"};
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<int> digits(1, 25);
  for (int i = 0; i < 300; ++i) {
    inputs.push_back(random_number(digits(rng), rng, i % 3 == 0) + "+" +
                     random_number(digits(rng), rng, i % 5 == 0));
  }
  for (const auto& input : inputs) {
    const Trace trace = task.teach(input);
    ASSERT_EQ(trace.output, task.solve(input)) << input;
    ASSERT_TRUE(replays(task, trace));
  }
  EXPECT_EQ(task.teach("999+1").output, "1000");
  EXPECT_EQ(task.teach("0+0").output, "0");
}

TEST(AdditionTeacher, EveryInvocationHasBoundedLength) {
  // ADD is tail-recursive, so no invocation grows with the number of digits: the longest is
  // LSHIFT (four MOVEs and a return).
  const auto& task = addition();
  std::mt19937_64 rng(4);
  for (int length : {1, 2, 5, 10, 50, 200}) {
    for (int i = 0; i < 3; ++i) {
      TraceStats stats;
      ASSERT_TRUE(replays(task, task.teach(task.random_input(length, rng)), &stats));
      EXPECT_LE(stats.max_invocation_steps, 5u) << "length " << length;
      EXPECT_GE(stats.max_depth, length + 1) << "one nested ADD per column";
    }
  }
}

TEST(AdditionTeacher, DefaultLimitsLetTheReferenceProgramFinish) {
  const auto& task = addition();
  std::mt19937_64 rng(5);
  for (int length = 1; length <= 60; ++length) {
    const std::string input = task.random_input(length, rng);
    TraceStats stats;
    ASSERT_TRUE(replays(task, task.teach(input), &stats));
    const Limits limits = task.default_limits(length);
    EXPECT_LE(stats.total_steps, limits.max_steps) << input;
    EXPECT_LE(stats.max_depth, limits.max_depth) << input;
    // ...and are tight enough to stop a runaway program (within a small factor).
    EXPECT_LE(limits.max_steps, 8 * stats.total_steps + 100) << input;
  }
  // "999+1" carries into a new column: the limits follow the scratchpad, not the operands.
  TraceStats stats;
  ASSERT_TRUE(replays(task, task.teach("1+999"), &stats));
  EXPECT_LE(stats.total_steps, task.default_limits(3).max_steps);
  EXPECT_LE(stats.max_depth, task.default_limits(3).max_depth);
}

TEST(AdditionTeacher, CallSequenceOfFivePlusSeven) {
  // Hand-checked: 5+7 = 12 on a 3-column scratchpad.
  const auto& task = addition();
  const Trace trace = task.teach("5+7");
  EXPECT_EQ(trace.output, "12");
  enum { ADD, ADD1, CARRY, LSHIFT, WRITE, MOVE };
  const std::vector<Call> expected{
      {ADD, {0, 0, 0}, 0},
      {ADD1, {0, 0, 0}, 1},
      {WRITE, {kOut, 2, 0}, 2},
      {CARRY, {0, 0, 0}, 2},
      {MOVE, {kCarry, kLeft, 0}, 3},
      {WRITE, {kCarry, 1, 0}, 3},
      {MOVE, {kCarry, kRight, 0}, 3},
      {LSHIFT, {0, 0, 0}, 1},
      {MOVE, {kIn1, kLeft, 0}, 2},
      {MOVE, {kIn2, kLeft, 0}, 2},
      {MOVE, {kCarry, kLeft, 0}, 2},
      {MOVE, {kOut, kLeft, 0}, 2},
      {ADD, {0, 0, 0}, 1},
      {ADD1, {0, 0, 0}, 2},
      {WRITE, {kOut, 1, 0}, 3},
      {LSHIFT, {0, 0, 0}, 2},
      {MOVE, {kIn1, kLeft, 0}, 3},
      {MOVE, {kIn2, kLeft, 0}, 3},
      {MOVE, {kCarry, kLeft, 0}, 3},
      {MOVE, {kOut, kLeft, 0}, 3},
      {ADD, {0, 0, 0}, 2},
  };
  const auto calls = call_sequence(trace, task.programs());
  ASSERT_EQ(calls.size(), expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(calls[k], expected[k])
        << "call " << k << ": got program " << calls[k].program << " at depth " << calls[k].depth;
  }
  // Invocations in pre-order: ADD ADD1 CARRY LSHIFT ADD ADD1 LSHIFT ADD.
  std::vector<int> programs;
  for (const auto& inv : trace.invocations) programs.push_back(inv.program);
  EXPECT_EQ(programs, (std::vector<int>{ADD, ADD1, CARRY, LSHIFT, ADD, ADD1, LSHIFT, ADD}));
  // The last ADD sees an empty column and returns at once.
  ASSERT_EQ(trace.invocations.back().steps.size(), 1u);
  EXPECT_TRUE(trace.invocations.back().steps[0].end);
  EXPECT_EQ(trace.invocations.back().steps[0].observation,
            (std::vector<int>{kBlank, kBlank, kBlank, kBlank}));
}

TEST(AdditionTask, FormatArgsNamesRowsAndDirections) {
  const auto& task = addition();
  EXPECT_EQ(task.format_args(AdditionTask::kWrite, {kOut, 7, 0}), "OUT, 7");
  EXPECT_EQ(task.format_args(AdditionTask::kMove, {kIn2, kRight, 0}), "IN2, RIGHT");
  EXPECT_EQ(task.format_args(AdditionTask::kMove, {kCarry, kLeft, 0}), "CARRY, LEFT");
  EXPECT_EQ(task.format_args(AdditionTask::kAdd1, {0, 0, 0}), "");
}

// --- addition-primitive: the column's arithmetic by a full-adder primitive -----------------------

/// A full adder that forgets the carry in, standing in for a badly trained network.
class CarrylessAdder final : public Primitive {
 public:
  CarrylessAdder() : Primitive(parse_primitive("fulladd"), PrimitiveKind::kFullAdder, 10) {}
  int apply(int x, int y, int) const override { return x + y; }
  std::string implementation() const override { return "test"; }
};

TEST(AdditionPrimitive, FullAddReadsTheColumnAndShowsTheCarryInTheRegister) {
  const AdditionTask task(std::make_shared<CarrylessAdder>(), nullptr);
  EXPECT_EQ(task.name(), "addition-primitive");
  EXPECT_EQ(task.observation_sizes(), (std::vector<int>{11, 11, 11, 11, 3}));
  auto env = task.make_environment("8+5");
  EXPECT_EQ(env->observe()[4], 0) << "empty register";
  env->act(AdditionTask::kFullAdd, {0, 0, 0});
  EXPECT_EQ(env->observe()[4], 2) << "8 + 5 carries";
  EXPECT_THROW(write(*env, kOut, 11), ActError);
  env->act(AdditionTask::kWrite, {kOut, AdditionTask::kRegister, 0});
  EXPECT_EQ(env->observe()[kOut], 3);
  EXPECT_EQ(task.format_args(AdditionTask::kWrite, {kOut, AdditionTask::kRegister, 0}), "OUT, REG");
  auto fresh = task.make_environment("1+1");
  EXPECT_THROW(fresh->act(AdditionTask::kWrite, {kOut, AdditionTask::kRegister, 0}), ActError)
      << "the register is empty";
}

TEST(AdditionPrimitive, ReferenceTraceReplaysAndMatchesGroundTruth) {
  const Task& task = task_by_name("addition-primitive");
  std::mt19937_64 rng(3);
  for (int length : {1, 2, 5, 20, 100}) {
    for (int repeat = 0; repeat < 10; ++repeat) {
      const std::string input = task.random_input(length, rng);
      TraceStats stats;
      const Trace trace = task.teach(input);
      ASSERT_TRUE(replays(task, trace, &stats));
      EXPECT_EQ(trace.output, task.solve(input));
      EXPECT_LE(stats.total_steps, task.default_limits(length).max_steps);
      EXPECT_LE(stats.max_depth, task.default_limits(length).max_depth);
    }
  }
  const auto calls = call_sequence(task.teach("5+7"), task.programs());
  ASSERT_GE(calls.size(), 5u);
  EXPECT_EQ(calls[2].program, AdditionTask::kFullAdd);
  EXPECT_EQ(calls[3], (Call{AdditionTask::kWrite, {kOut, AdditionTask::kRegister, 0}, 2}));
  EXPECT_EQ(calls[4].program, AdditionTask::kCarry);
}

TEST(AdditionPrimitive, GroundTruthIgnoresAWrongPrimitiveThatTheEnvironmentApplies) {
  Binding binding;
  binding.primitive = std::make_shared<CarrylessAdder>();
  const auto task = bind_task("addition-primitive", binding);
  EXPECT_EQ(task->solve("5+7"), "12");
  // Replaying the reference program on the environment with the carry-less adder goes wrong:
  // 15+7 = 22, but the tens column adds 1 + 0 and forgets the carry.
  const Trace trace = task->teach("15+7");
  EXPECT_EQ(trace.output, "22");
  EXPECT_FALSE(replays(*task, trace));
}

TEST(AdditionPrimitive, BindingChecksTheKindAndDomain) {
  Binding binding;
  binding.primitive = make_symbolic_primitive(parse_primitive("add"), 10);
  EXPECT_THROW(bind_task("addition-primitive", binding), UsageError);
  binding.primitive = make_symbolic_primitive(parse_primitive("fulladd"), 100);
  EXPECT_THROW(bind_task("addition-primitive", binding), UsageError);
}

}  // namespace
}  // namespace engram::datasets
