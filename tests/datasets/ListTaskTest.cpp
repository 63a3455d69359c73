#include "datasets/ListTask.h"

#include "datasets/TraceFile.h"
#include "tests/datasets/TraceReplay.h"
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace engram::datasets {
namespace {

using Op = HigherOrderTask::Operand;
using testing::replays;
using testing::TraceStats;

std::shared_ptr<const Primitive> sym(const std::string& text, int k = 10) {
  return make_symbolic_primitive(parse_primitive(text), k);
}

std::unique_ptr<Task> bound(const std::string& task, const std::string& primitive, int k = 10,
                            int init = 0) {
  Binding b;
  b.primitive = sym(primitive, k);
  b.init = init;
  return bind_task(task, b);
}

/// A primitive that returns a fixed wrong answer, standing in for a badly trained network.
class ConstantPrimitive final : public Primitive {
 public:
  ConstantPrimitive(const std::string& text, PrimitiveKind kind, int value)
      : Primitive(parse_primitive(text), kind, 10), value_(value) {}
  int apply(int, int, int) const override { return value_; }
  std::string implementation() const override { return "constant"; }

 private:
  int value_;
};

// --- the primitive catalog -----------------------------------------------------------------------

TEST(Primitives, SymbolicValuesAreTheDocumentedFunctionsModuloK) {
  EXPECT_EQ(sym("succ")->apply(9), 0);
  EXPECT_EQ(sym("double")->apply(7), 4);
  EXPECT_EQ(sym("square")->apply(7), 9);
  EXPECT_EQ(sym("square", 100)->apply(99), 1);
  EXPECT_EQ(sym("negate")->apply(0), 0);
  EXPECT_EQ(sym("negate")->apply(3), 7);
  EXPECT_EQ(sym("even")->apply(0), 1);
  EXPECT_EQ(sym("even")->apply(7), 0);
  std::vector<int> primes;
  for (int x = 0; x < 30; ++x) {
    if (sym("prime", 30)->apply(x)) primes.push_back(x);
  }
  EXPECT_EQ(primes, (std::vector<int>{2, 3, 5, 7, 11, 13, 17, 19, 23, 29}));
  EXPECT_EQ(sym("gt(5)")->apply(5), 0);
  EXPECT_EQ(sym("gt(5)")->apply(6), 1);
  EXPECT_EQ(sym("div(3)")->apply(9), 1);
  EXPECT_EQ(sym("div(3)")->apply(0), 1);
  EXPECT_EQ(sym("div(3)")->apply(4), 0);
  EXPECT_EQ(sym("add")->apply(7, 8), 5);
  EXPECT_EQ(sym("mul", 100)->apply(12, 34), 8);
  EXPECT_EQ(sym("max")->apply(3, 8), 8);
  EXPECT_EQ(sym("min")->apply(3, 8), 3);
  EXPECT_EQ(sym("fulladd")->apply(9, 9, 1), 19);
  EXPECT_EQ(kind_results(PrimitiveKind::kFullAdder, 10), 20);
}

TEST(Primitives, LibraryHasTwelveFamiliesAndOneHeldOut) {
  int library = 0, held_out = 0;
  for (const auto& f : primitive_families()) (f.in_library ? library : held_out)++;
  EXPECT_EQ(library, 12) << "4 unary, 3 predicates, 4 binary, and addition's full adder";
  EXPECT_EQ(held_out, 1);
  EXPECT_FALSE(find_family("div")->in_library);
  EXPECT_EQ(find_family("gt")->kind, PrimitiveKind::kPredicate);
  EXPECT_EQ(find_family("nope"), nullptr);
}

TEST(Primitives, ParseAcceptsSpacesAndGivesCanonicalText) {
  EXPECT_EQ(parse_primitive(" gt ( 5 ) ").text(), "gt(5)");
  EXPECT_EQ(parse_primitive("double").text(), "double");
}

void expect_input_error(const std::string& text, const std::string& fragment) {
  try {
    parse_primitive(text);
    ADD_FAILURE() << "'" << text << "' was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
  }
}

TEST(Primitives, ParseErrorsNameTheColumnAndTheProblem) {
  expect_input_error("triple", "column 1: unknown primitive 'triple'");
  expect_input_error("gt", "gt takes a parameter");
  expect_input_error("even(2)", "even takes no parameter");
  expect_input_error("gt(x)", "column 4: expected a non-negative integer");
  expect_input_error("gt(5", "column 5: expected ')'");
  expect_input_error("gt(5) x", "column 7: unexpected 'x'");
  expect_input_error("", "column 1: expected a primitive name");
}

TEST(Primitives, ParameterMustLieInTheFamilysDomain) {
  EXPECT_THROW(sym("gt(10)"), InputError);
  EXPECT_NO_THROW(sym("gt(10)", 100));
  EXPECT_THROW(sym("div(0)"), InputError);
  EXPECT_THROW(sym("add", 1), InputError);
}

// --- the list environment ------------------------------------------------------------------------

TEST(ListEnvironment, ObservesEndsAndRegisterStateButNoValue) {
  auto task = bound("filter", "even");
  auto env = task->make_environment("4,3");
  EXPECT_EQ(env->observe(), (std::vector<int>{0, 1, HigherOrderTask::kEmpty}));
  env->act(HigherOrderTask::kApply, {Op::kX, Op::kNone, 0});
  EXPECT_EQ(env->observe()[2], HigherOrderTask::kTrue);
  env->act(HigherOrderTask::kWrite, {Op::kOut, Op::kX, 0});
  env->act(HigherOrderTask::kMove, {Op::kX, 0, 0});
  env->act(HigherOrderTask::kApply, {Op::kX, Op::kNone, 0});
  EXPECT_EQ(env->observe()[2], HigherOrderTask::kFalse);
  env->act(HigherOrderTask::kMove, {Op::kX, 0, 0});
  EXPECT_EQ(env->observe(), (std::vector<int>{1, 1, HigherOrderTask::kFalse}));
  EXPECT_EQ(env->result(), "4");
  EXPECT_THROW(env->act(HigherOrderTask::kMove, {Op::kX, 0, 0}), ActError);
  EXPECT_THROW(env->act(HigherOrderTask::kApply, {Op::kX, Op::kNone, 0}), ActError)
      << "X is at its end";
}

TEST(ListEnvironment, MapValuesShowOnlyAsAValueInTheRegister) {
  auto task = bound("map", "square");
  auto env = task->make_environment("3");
  env->act(HigherOrderTask::kApply, {Op::kX, Op::kNone, 0});
  EXPECT_EQ(env->observe()[2], HigherOrderTask::kValue);
  env->act(HigherOrderTask::kWrite, {Op::kOut, Op::kReg, 0});
  EXPECT_EQ(env->result(), "9");
}

TEST(ListEnvironment, ApplyChecksTheBoundPrimitivesArity) {
  auto env = bound("map", "double")->make_environment("3");
  EXPECT_THROW(env->act(HigherOrderTask::kApply, {Op::kX, Op::kAcc, 0}), ActError);
  auto fold_env = bound("fold", "add")->make_environment("3");
  EXPECT_THROW(fold_env->act(HigherOrderTask::kApply, {Op::kX, Op::kNone, 0}), ActError);
  EXPECT_THROW(fold_env->act(HigherOrderTask::kWrite, {Op::kAcc, Op::kReg, 0}), ActError)
      << "the register is empty";
}

TEST(ListEnvironment, FoldResultIsTheAccumulatorStartingAtInit) {
  auto task = bound("fold", "add", 10, 7);
  auto env = task->make_environment("5");
  EXPECT_EQ(env->result(), "7");
  env->act(HigherOrderTask::kApply, {Op::kAcc, Op::kX, 0});
  env->act(HigherOrderTask::kWrite, {Op::kAcc, Op::kReg, 0});
  EXPECT_EQ(env->result(), "2");
}

TEST(ListEnvironment, InputErrorsNameTheColumnAndElement) {
  auto task = bound("map", "succ");
  try {
    task->make_environment("1,2,12");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("column 5: value 12 (element 3) is outside the domain 0..9"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(task->make_environment("1,,2"), InputError);
  EXPECT_THROW(task->make_environment("1;2"), InputError);
  EXPECT_THROW(task->make_environment("1 2"), InputError);
  EXPECT_THROW(task->make_environment("-1"), InputError);
  EXPECT_NO_THROW(task->make_environment(""));
  EXPECT_NO_THROW(task->make_environment(" 1 , 2 "));
  auto zip = bound("zipwith", "add");
  EXPECT_THROW(zip->make_environment("1,2"), InputError);
  try {
    zip->make_environment("1,2;3,x");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("column 7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(zip->make_environment("1;2;3"), InputError);
}

TEST(ListTask, BindingRejectsTheWrongKindOfPrimitiveAndInitOutsideTheDomain) {
  Binding b;
  b.primitive = sym("add");
  try {
    bind_task("map", b);
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("arity mismatch"), std::string::npos) << e.what();
  }
  b.primitive = sym("double");
  EXPECT_THROW(bind_task("filter", b), UsageError);
  EXPECT_THROW(bind_task("addition", b), UsageError);
  b.primitive = sym("add");
  b.init = 10;
  EXPECT_THROW(bind_task("fold", b), UsageError);
}

TEST(ListTask, SolveComputesEachHighOrderFunction) {
  EXPECT_EQ(bound("map", "square")->solve("1,2,3,4"), "1,4,9,6");
  EXPECT_EQ(bound("filter", "prime")->solve("1,2,3,4,5"), "2,3,5");
  EXPECT_EQ(bound("filter", "gt(3)")->solve("1,2"), "");
  EXPECT_EQ(bound("fold", "add", 10, 5)->solve("1,2,3"), "1");
  EXPECT_EQ(bound("fold", "max")->solve(""), "0");
  EXPECT_EQ(bound("scan", "add")->solve("1,2,3,4"), "1,3,6,0");
  EXPECT_EQ(bound("zipwith", "mul")->solve("1,2,3;4,5"), "4,0");
  EXPECT_EQ(bound("map", "double", 100)->solve("40,60"), "80,20");
}

TEST(ListTask, GroundTruthUsesTheExactTwinNotTheBoundPrimitive) {
  Binding b;
  b.primitive = std::make_shared<ConstantPrimitive>("succ", PrimitiveKind::kUnary, 0);
  auto task = bind_task("map", b);
  EXPECT_EQ(task->solve("1,2"), "2,3");
  auto env = task->make_environment("1");
  env->act(HigherOrderTask::kApply, {Op::kX, Op::kNone, 0});
  env->act(HigherOrderTask::kWrite, {Op::kOut, Op::kReg, 0});
  EXPECT_EQ(env->result(), "0") << "the environment calls the bound primitive";
}

class ListTaskPrograms : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(EveryPrimitive, ListTaskPrograms,
                         ::testing::Values("map:succ", "map:double", "map:square", "map:negate",
                                           "filter:even", "filter:prime", "filter:gt(4)",
                                           "filter:div(3)", "fold:add", "fold:mul", "fold:max",
                                           "fold:min", "zipwith:add", "zipwith:mul", "zipwith:max",
                                           "scan:add", "scan:min"),
                         [](const auto& info) {
                           std::string name;
                           for (char c : info.param)
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST_P(ListTaskPrograms, ReferenceTraceReplaysAndMatchesGroundTruthOnRandomInputs) {
  const std::string spec = GetParam();
  const auto colon = spec.find(':');
  for (int k : {10, 100}) {
    auto task = bound(spec.substr(0, colon), spec.substr(colon + 1), k, k == 10 ? 3 : 0);
    std::mt19937_64 rng(7);
    for (int length : {0, 1, 2, 5, 17, 60}) {
      for (int repeat = 0; repeat < 5; ++repeat) {
        const std::string input = task->random_input(length, rng);
        const Trace trace = task->teach(input);
        TraceStats stats;
        ASSERT_TRUE(replays(*task, trace, &stats));
        EXPECT_EQ(trace.output, task->solve(input));
        EXPECT_LE(stats.max_invocation_steps, 6u) << "every invocation has bounded length";
        const Limits limits = task->default_limits(length);
        EXPECT_LE(stats.total_steps, limits.max_steps);
        EXPECT_LE(stats.max_depth, limits.max_depth);
      }
    }
  }
}

TEST(ListTask, FilterTraceBranchesOnThePredicatesResult) {
  auto task = bound("filter", "even");
  const Trace trace = task->teach("2,3");
  // Root, FILTER1 (keeps 2), FILTER, FILTER1 (drops 3), FILTER.
  ASSERT_EQ(trace.invocations.size(), 5u);
  EXPECT_EQ(trace.invocations[1].steps.size(), 4u) << "APPLY, WRITE, MOVE, return";
  EXPECT_EQ(trace.invocations[3].steps.size(), 3u) << "APPLY, MOVE, return";
  EXPECT_EQ(task->format_args(HigherOrderTask::kWrite, trace.invocations[1].steps[1].callee_args),
            "OUT, X");
}

TEST(ListTask, TraceFilesRoundTripForHighOrderTasks) {
  testing::TempDir dir;
  const auto& task = task_by_name("zipwith");
  const auto set = generate_traces(task, {1, 4, 3, 9});
  write_trace_file(dir.file("z.jsonl"), set);
  const auto back = read_trace_file(dir.file("z.jsonl"));
  EXPECT_EQ(back.task, "zipwith");
  EXPECT_EQ(back.traces, set.traces);
}

}  // namespace
}  // namespace engram::datasets
