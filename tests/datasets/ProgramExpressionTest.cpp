#include "datasets/ProgramExpression.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace engram::datasets {
namespace {

TEST(ProgramExpression, ParsesNestedStagesIntoATree) {
  const auto e = parse_expression("fold(add, 0, map(square, filter(even, xs)))");
  EXPECT_EQ(e.function, "fold");
  EXPECT_EQ(e.primitive.text(), "add");
  EXPECT_EQ(e.init, 0);
  ASSERT_EQ(e.inputs.size(), 1u);
  EXPECT_EQ(e.inputs[0].function, "map");
  EXPECT_EQ(e.inputs[0].column, 14);
  EXPECT_EQ(e.inputs[0].inputs[0].function, "filter");
  EXPECT_EQ(e.inputs[0].inputs[0].inputs[0].function, "xs");
  EXPECT_EQ(e.text(), "fold(add, 0, map(square, filter(even, xs)))");
  EXPECT_FALSE(uses_second_list(e));
}

TEST(ProgramExpression, AcceptsParametersWhitespaceAndTwoLists) {
  const auto e = parse_expression("  zipwith( max ,scan(min,9,xs) , filter( gt ( 5 ) , ys ) ) ");
  EXPECT_EQ(e.text(), "zipwith(max, scan(min, 9, xs), filter(gt(5), ys))");
  EXPECT_TRUE(uses_second_list(e));
  EXPECT_EQ(e.inputs[1].primitive.parameter, 5);
}

void expect_error_at(const std::string& text, int column, const std::string& fragment) {
  try {
    parse_expression(text);
    ADD_FAILURE() << "'" << text << "' was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("program column " + std::to_string(column) + ": "), std::string::npos)
        << text << " -> " << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << text << " -> " << message;
  }
}

TEST(ProgramExpression, ErrorsNameTheColumnOfTheProblem) {
  expect_error_at("map(double, xs", 15, "expected ')', found the end of the program");
  expect_error_at("map(double xs)", 12, "expected ','");
  expect_error_at("mop(double, xs)", 1, "unknown function 'mop'");
  expect_error_at("map(dubble, xs)", 5, "unknown primitive 'dubble'");
  expect_error_at("map(add, xs)", 5, "arity mismatch: map applies a unary primitive");
  expect_error_at("filter(double, xs)", 8, "arity mismatch");
  expect_error_at("fold(add, xs)", 11, "expected a non-negative integer");
  expect_error_at("map(double, fold(add, 0, xs))", 13, "fold (column 13) returns a number");
  expect_error_at("map(double, xs) xs", 17, "unexpected 'x'");
  expect_error_at("filter(gt(x), xs)", 11, "expected a non-negative integer parameter");
  expect_error_at("filter(gt, xs)", 8, "gt takes a parameter");
  expect_error_at("", 1, "expected a name");
  // Deep nesting is an error, not a stack overflow.
  std::string deep;
  for (int i = 0; i < 20000; ++i) deep += "map(succ, ";
  deep += "xs" + std::string(20000, ')');
  expect_error_at(deep, 641, "more than 64 nested stages");
  std::string ok;
  for (int i = 0; i < 64; ++i) ok += "map(succ, ";
  EXPECT_NO_THROW(parse_expression(ok + "xs" + std::string(64, ')')));
}

TEST(ProgramExpression, DomainChecksNameTheColumn) {
  const auto e = parse_expression("scan(add, 2, filter(gt(50), xs))");
  try {
    check_expression_domain(e, 10);
    ADD_FAILURE();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("program column 21"), std::string::npos)
        << error.what();
  }
  EXPECT_NO_THROW(check_expression_domain(e, 100));
  try {
    check_expression_domain(parse_expression("scan(add, 12, xs)"), 10);
    ADD_FAILURE();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("program column 11: initial value 12"),
              std::string::npos)
        << error.what();
  }
}

TEST(ProgramExpression, SymbolicEvaluationComposesTheStages) {
  const std::vector<int> xs{1, 2, 3, 4}, ys{5, 6, 7, 8};
  EXPECT_EQ(evaluate_symbolic(parse_expression("fold(add, 0, map(square, filter(even, xs)))"), xs,
                              ys, 10),
            (std::vector<int>{0}));  // 4 + 16 = 20 = 0 mod 10
  EXPECT_EQ(evaluate_symbolic(parse_expression("fold(add, 0, map(square, filter(even, xs)))"), xs,
                              ys, 100),
            (std::vector<int>{20}));
  EXPECT_EQ(evaluate_symbolic(parse_expression("zipwith(mul, xs, scan(add, 0, ys))"), xs, ys, 100),
            (std::vector<int>{5, 22, 54, 4}));  // scan: 5, 11, 18, 26
  EXPECT_EQ(evaluate_symbolic(parse_expression("map(negate, filter(gt(7), xs))"), xs, ys, 10),
            (std::vector<int>{}));
}

}  // namespace
}  // namespace engram::datasets
