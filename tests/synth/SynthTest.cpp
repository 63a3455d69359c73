// synth/: the element computations' Python semantics, their paths, the table families they
// become, and the recogniser on small hand-written traces.
#include "common/Errors.h"
#include "datasets/Primitive.h"
#include "synth/Recognizer.h"
#include "synth/Template.h"
#include "synth/Trace.h"
#include "tests/support/Thrown.h"

#include <gtest/gtest.h>

namespace engram::synth {
namespace {

Expr op(const std::string& name, std::vector<Expr> args) { return Expr::operation(name, args); }
Expr c(std::int64_t v) { return Expr::constant(v); }
Expr x(int i = 0) { return Expr::parameter(i); }

TEST(SynthExpr, EvaluatesAsPythonDoes) {
  EXPECT_EQ(op("mul", {c(3), c(4)}).evaluate({}), 12);  // once 0: the result was read too early
  EXPECT_EQ(op("add", {x(), c(7)}).evaluate({5}), 12);
  EXPECT_EQ(op("sub", {c(2), x()}).evaluate({5}), -3);
  EXPECT_EQ(op("floordiv", {c(-7), c(2)}).evaluate({}), -4);
  EXPECT_EQ(op("mod", {c(-7), c(3)}).evaluate({}), 2);
  EXPECT_EQ(op("mod", {c(7), c(-3)}).evaluate({}), -2);
  EXPECT_EQ(op("pow", {c(3), c(4)}).evaluate({}), 81);
  EXPECT_EQ(op("powmod", {c(3), c(200), c(7)}).evaluate({}), 2);  // pow(3, 200, 7)
  EXPECT_EQ(op("neg", {c(4)}).evaluate({}), -4);
  EXPECT_EQ(op("invert", {c(4)}).evaluate({}), -5);
  EXPECT_EQ(op("lt", {c(2), c(3)}).evaluate({}), 1);
  EXPECT_EQ(op("rshift", {c(-9), c(1)}).evaluate({}), -5);
}

TEST(SynthExpr, WhatPythonRejectsOrIntsCannotHoldHasNoValue) {
  EXPECT_FALSE(op("floordiv", {c(1), c(0)}).evaluate({}));
  EXPECT_FALSE(op("mod", {c(1), c(0)}).evaluate({}));
  EXPECT_FALSE(op("pow", {c(2), c(-1)}).evaluate({}));   // a float in Python
  EXPECT_FALSE(op("pow", {c(10), c(30)}).evaluate({}));  // beyond 64 bits
  EXPECT_FALSE(op("mul", {c(INT64_MAX), c(2)}).evaluate({}));
  EXPECT_FALSE(op("lshift", {c(1), c(-1)}).evaluate({}));
  EXPECT_FALSE(op("unknown", {c(1), c(1)}).evaluate({}));
}

TEST(SynthTemplate, ReplaysThePathWhoseTestsHold) {
  Template t(1, "line 3");  // x if x > 3 else 0
  const Expr test = op("gt", {x(), c(3)});
  t.add({{{test, true}}, true, x()});
  t.add({{{test, false}}, true, c(0)});
  EXPECT_EQ(t.apply({7}).value, 7);
  EXPECT_EQ(t.apply({2}).value, 0);
  EXPECT_TRUE(t.apply({2}).covered);
  EXPECT_TRUE(t.always_included());
  EXPECT_FALSE(t.identity(0));
}

TEST(SynthTemplate, AnUnseenBranchIsNotCovered) {
  Template t(1, "line 3");
  t.add({{{op("gt", {x(), c(3)}), true}}, false, {}});  // dropped above 3; below: never seen
  EXPECT_FALSE(t.apply({1}).covered);
  EXPECT_TRUE(t.apply({5}).covered);
  EXPECT_FALSE(t.apply({5}).included);
}

TEST(SynthTemplate, TheSameTestsWithAnotherResultAreAnError) {
  Template t(1, "line 9");
  t.add({{}, true, op("mul", {x(), c(2)})});
  t.add({{}, true, op("mul", {x(), c(2)})});
  EXPECT_EQ(t.paths().size(), 1u);
  EXPECT_EQ(t.paths()[0].seen, 2);
  try {
    t.add({{}, true, op("mul", {x(), c(3)})});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 9"), std::string::npos) << e.what();
  }
}

TEST(SynthTableFamily, IsAPrimitiveOfItsDomain) {
  datasets::TableFamily f;
  f.name = "affine_test";
  f.kind = datasets::PrimitiveKind::kUnary;
  f.k = 5;
  f.table = {1, 4, 2, 0, 3};  // (3x + 1) % 5
  datasets::register_table_family(f);
  const auto ref = datasets::parse_primitive("affine_test");
  EXPECT_EQ(datasets::symbolic_apply(ref, 5, 2), 2);
  EXPECT_EQ(datasets::make_symbolic_primitive(ref, 5)->apply(4), 3);
  EXPECT_THROW(datasets::make_symbolic_primitive(ref, 10), InputError);  // another K
  EXPECT_THROW(datasets::parse_primitive("affine_test(2)"), InputError);
}

TEST(SynthTableFamily, RefusesBadTables) {
  datasets::TableFamily f;
  f.kind = datasets::PrimitiveKind::kBinary;
  f.k = 3;
  f.table = std::vector<int>(9, 0);
  const auto refusal = [&] {
    return testing::message_of<InputError>([&] { datasets::register_table_family(f); });
  };
  f.name = "add";
  testing::expect_says(refusal(), "'add' is a library primitive");
  f.name = "9lives";
  testing::expect_says(refusal(), "primitive name '9lives' is not an identifier");
  f.name = "ok_name";
  f.table.pop_back();
  testing::expect_says(refusal(), "primitive 'ok_name': its table has 8 values, not 9");
  f.table = std::vector<int>(9, 3);
  testing::expect_says(refusal(), "primitive 'ok_name': the value 3 lies outside 0..2");
  f.kind = datasets::PrimitiveKind::kPredicate;
  f.table = {0, 1, 2};
  // A predicate gives 0 or 1.
  testing::expect_says(refusal(), "primitive 'ok_name': the value 2 lies outside 0..1");
}

// A run of [x * 2 % 10 for x in xs] on [3, 7].
const char* const kMapTrace = R"({"function": "f", "k": 10, "arity": 1, "runs": [{
  "input": [[3, 7]],
  "nodes": [[1, "in", [0, 0], 3, 0, [[0, 0]]], [2, "in", [0, 1], 7, 0, [[0, 1]]],
            [4, "mul", [1, ["c", 2]], 6, 2, [[0, 0]]], [5, "mod", [4, ["c", 10]], 6, 2, [[0, 0]]],
            [7, "mul", [2, ["c", 2]], 14, 2, [[0, 1]]], [8, "mod", [7, ["c", 10]], 4, 2, [[0, 1]]]],
  "branches": [], "iters": [], "lists": [[9, [5, 8]]], "reads": [], "calls": [],
  "result": {"list": [5, 8]}}]})";

TEST(SynthRecognizer, AMapOfOneInputList) {
  const Stage s = recognize(parse_trace(kMapTrace));
  EXPECT_EQ(s.shape(), "map(xs)");
  EXPECT_EQ(s.fn.text(), "mod(mul(x0, 2), 10)");
}

// A run of `m = 9; for x in xs: if x < m: m = x` on [5, 8, 2]: the first update starts from the
// constant 9, the later ones from an element; both are the same selection.
const char* const kMinTrace = R"({"function": "f", "k": 10, "arity": 1, "runs": [{
  "input": [[5, 8, 2]],
  "nodes": [[1, "in", [0, 0], 5, 0, [[0, 0]]], [2, "in", [0, 1], 8, 0, [[0, 1]]],
            [3, "in", [0, 2], 2, 0, [[0, 2]]],
            [6, "lt", [1, ["c", 9]], 1, 4, [[0, 0]]], [10, "lt", [2, 1], 0, 4, [[0, 0], [0, 1]]],
            [14, "lt", [3, 1], 1, 4, [[0, 0], [0, 2]]]],
  "branches": [[7, 6, 1, 4], [11, 10, 0, 4], [15, 14, 1, 4]],
  "iters": [[5, 0, "3", {"m": ["c", 9]}], [8, 0, "3", {"m": 1, "x": 1}],
            [12, 0, "3", {"m": 1, "x": 2}], [16, 0, "3", {"m": 3, "x": 3}],
            [17, 0, "exit", {"m": 3, "x": 3}]],
  "lists": [], "reads": [], "calls": [], "result": {"value": 3}}]})";

TEST(SynthRecognizer, AFoldWhoseFirstUpdateStartsFromAConstant) {
  const Stage s = recognize(parse_trace(kMinTrace));
  EXPECT_EQ(s.shape(), "fold(xs)");
  EXPECT_FALSE(s.identity_init);
  EXPECT_EQ(s.init, 9);
  EXPECT_EQ(s.fn.apply({4, 6}).value, 4);  // the accumulator 4 stays against 6
  EXPECT_EQ(s.fn.apply({4, 1}).value, 1);
}

TEST(SynthRecognizer, MalformedTracesAreFormatErrors) {
  EXPECT_THROW(parse_trace("{"), FormatError);
  EXPECT_THROW(parse_trace(R"({"function": "f", "k": 10, "arity": 1})"), FormatError);
  std::string forward = kMapTrace;  // node 4 uses node 7, created later
  forward.replace(forward.find("[1, [\"c\", 2]], 6"), 16, "[7, [\"c\", 2]], 6");
  EXPECT_THROW(parse_trace(forward), FormatError);
}

}  // namespace
}  // namespace engram::synth
