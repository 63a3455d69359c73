#pragma once
/// \file
/// High-order list programs: MAP, FILTER, FOLD, ZIPWITH and SCAN, each a task whose program is
/// learned once and applied with any primitive of the right kind (datasets/Primitive.h). The
/// primitive is bound to the environment when the program starts; the program's steps only say
/// "APPLY the bound primitive" and never see which one it is.
///
/// The list environment holds the input list X (and Y for ZIPWITH), each with a pointer that
/// starts at its first element, the output list OUT (appended to), an accumulator ACC (set to the
/// initial value for FOLD and SCAN) and a register REG with the last primitive result. Values lie
/// in 0..K-1. The observation is three categorical slots:
///   X at end (0/1), Y at end (0/1; 1 when there is no Y), REG: 0 empty, 1 false, 2 true, 3 a value
/// so FILTER sees the predicate's result, and no program ever sees a value.
///
/// ACTs (operands: NONE 0, X 1 and Y 2 (the elements under the pointers), ACC 3, REG 4, OUT 5):
///   APPLY(a, b)     REG = primitive(a) or primitive(a, b); b is NONE for unary primitives
///   WRITE(dest, s)  dest OUT appends s, dest ACC sets ACC = s; s is REG, X, Y or ACC
///   MOVE(p)         pointer of X or Y one element to the right
/// Programs, tail-recursive as in Cai, Shin & Song (2017), so every invocation has bounded length:
///   MAP      if X at end: return; MAP1, MAP         MAP1     APPLY(X), WRITE(OUT, REG), MOVE(X)
///   FILTER   if X at end: return; FILTER1, FILTER   FILTER1  APPLY(X); if REG true: WRITE(OUT, X);
///                                                            MOVE(X)
///   FOLD     if X at end: return; FOLD1, FOLD       FOLD1    APPLY(ACC, X), WRITE(ACC, REG),
///   MOVE(X) SCAN     if X at end: return; SCAN1, SCAN       SCAN1    APPLY(ACC, X), WRITE(ACC,
///   REG),
///                                                            WRITE(OUT, REG), MOVE(X)
///   ZIPWITH  if X or Y at end: return; ZIP1, ZIPWITH ZIP1    APPLY(X, Y), WRITE(OUT, REG),
///   MOVE(X),
///                                                            MOVE(Y)
/// Results: FOLD the final accumulator (one number); the others the output list. SCAN's list holds
/// the accumulator after each element (not the initial value); ZIPWITH stops at the shorter list.
///
/// Input notation: comma-separated values, e.g. "3,1,2" (the empty string is the empty list);
/// ZIPWITH's two lists are separated by ';', e.g. "1,2;3,4".
///
/// \code
///   using namespace engram::datasets;
///   Binding b;  b.primitive = make_symbolic_primitive(parse_primitive("square"), 10);
///   auto map = bind_task("map", b);
///   map->solve("1,2,3");               // "1,4,9"
///   Trace t = map->teach("1,2,3");     // the reference program's execution
/// \endcode

#include "datasets/Primitive.h"
#include "datasets/Task.h"

#include <memory>

namespace engram::datasets {

enum class HigherOrder { kMap, kFilter, kFold, kZipWith, kScan };

/// What a task's program is applied with.
struct Binding {
  /// What APPLY calls (symbolic or learned); null: the task's default symbolic primitive, K = 10.
  std::shared_ptr<const Primitive> primitive;
  /// The exact twin that solve() and teach() use for ground truth; null: the symbolic primitive
  /// of primitive's name and domain. So a wrong learned primitive shows up as a wrong result.
  std::shared_ptr<const Primitive> reference;
  int init = 0;  ///< FOLD and SCAN: the accumulator's initial value, in 0..K-1
};

class HigherOrderTask final : public Task {
 public:
  enum Program { kRoot = 0, kStep, kApply, kWrite, kMove };
  enum Operand { kNone = 0, kX, kY, kAcc, kReg, kOut };
  enum RegisterState { kEmpty = 0, kFalse, kTrue, kValue };

  /// Throws UsageError when the primitive's kind is not the one this program applies
  /// (e.g. a binary primitive given to MAP), or the initial value is outside the domain.
  HigherOrderTask(HigherOrder which, Binding binding);

  std::string name() const override;
  const std::vector<ProgramSpec>& programs() const override { return programs_; }
  int root_program() const override { return kRoot; }
  std::vector<int> observation_sizes() const override { return {2, 2, 4}; }
  int arg_size() const override { return 6; }
  int min_length() const override { return 1; }
  std::string input_help() const override;
  std::unique_ptr<Environment> make_environment(const std::string& input) const override;
  std::string random_input(int length, std::mt19937_64& rng) const override;
  std::string solve(const std::string& input) const override;
  Limits default_limits(int length) const override;
  Trace teach(const std::string& input) const override;
  std::string format_args(int program, const Args& args) const override;
  std::shared_ptr<const Primitive> bound_primitive() const override { return binding_.primitive; }

  HigherOrder which() const { return which_; }
  /// The kind of primitive this program applies.
  PrimitiveKind primitive_kind() const;
  const Binding& binding() const { return binding_; }
  /// K of the bound primitive.
  int domain() const { return binding_.primitive->domain(); }

 private:
  HigherOrder which_;
  Binding binding_;
  std::vector<ProgramSpec> programs_;
};

/// The names of the high-order tasks: map, filter, fold, zipwith, scan.
const std::vector<std::string>& higher_order_task_names();
/// Whether `name` is one of them.
bool is_higher_order(const std::string& name);
/// Whether the task `name` applies a primitive: the high-order tasks and addition-primitive.
bool takes_primitive(const std::string& name);
/// The primitive kind the task `name` applies; throws InputError for tasks without primitives.
PrimitiveKind primitive_kind_of(const std::string& name);

/// The task called `name` bound to `binding` (addition-primitive: the full adder; `init` unused).
/// Tasks without primitives (addition, sort) accept only an empty binding (UsageError otherwise).
std::unique_ptr<Task> bind_task(const std::string& name, const Binding& binding);

/// Parses a list in input notation ("3,1,2", "" for empty) with values in 0..k-1; throws
/// InputError naming the element and the column of the problem. `column0` is the column of
/// text[0] within the whole input, for messages.
std::vector<int> parse_value_list(const std::string& text, int k, std::size_t column0 = 0);
/// The inverse of parse_value_list.
std::string format_value_list(const std::vector<int>& values);

}  // namespace engram::datasets
