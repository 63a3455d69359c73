#pragma once
/// \file
/// Pipelines of high-order programs written as expressions, e.g.
///   fold(add, 0, map(square, filter(even, xs)))
/// Grammar (whitespace anywhere between tokens):
///   expr      := list | stage
///   list      := "xs" | "ys"                      the input's first / second list
///   stage     := "map"     "(" primitive "," expr ")"
///              | "filter"  "(" primitive "," expr ")"
///              | "fold"    "(" primitive "," int "," expr ")"    int: the initial value
///              | "scan"    "(" primitive "," int "," expr ")"
///              | "zipwith" "(" primitive "," expr "," expr ")"
///   primitive := name | name "(" int ")"          e.g. double, gt(5)
/// FOLD returns a number, every other stage a list, so a FOLD can only be the outermost stage.
/// The primitive's kind must be the one the stage applies (unary for map, predicate for filter,
/// binary for fold, scan and zipwith). At most 64 stages nest. Every error names the column
/// (1-based) of the problem.
///
/// \code
///   auto e = engram::datasets::parse_expression("map(double, filter(gt(3), xs))");
///   e.function;              // "map"
///   e.inputs[0].function;    // "filter"
///   engram::datasets::evaluate_symbolic(e, {5, 1, 7}, {}, 10);   // {0, 4}: 2*5, 2*7 mod 10
/// \endcode

#include "datasets/Primitive.h"

#include <string>
#include <vector>

namespace engram::datasets {

struct Expression {
  /// "map", "filter", "fold", "scan", "zipwith" (a stage) or "xs", "ys" (an input list).
  std::string function;
  int column = 0;  ///< 1-based column of `function` in the text
  PrimitiveRef primitive;
  int primitive_column = 0;
  int init = 0;  ///< fold, scan
  int init_column = 0;
  std::vector<Expression> inputs;  ///< the stage's list arguments, in order

  bool is_list() const { return function == "xs" || function == "ys"; }
  /// Whether the value is a number (a FOLD) rather than a list.
  bool is_scalar() const { return function == "fold"; }
  /// Canonical text, e.g. "map(double, xs)".
  std::string text() const;
};

/// Parses and type-checks; throws InputError naming the column of the problem.
Expression parse_expression(const std::string& text);

/// Throws InputError (with the column) if a primitive's parameter or an initial value is outside
/// the domain 0..k-1.
void check_expression_domain(const Expression& expression, int k);

/// Whether the expression reads ys anywhere.
bool uses_second_list(const Expression& expression);

/// The exact result (a list; a FOLD gives one element) computed with the symbolic primitives.
std::vector<int> evaluate_symbolic(const Expression& expression, const std::vector<int>& xs,
                                   const std::vector<int>& ys, int k);

}  // namespace engram::datasets
