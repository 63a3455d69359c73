#pragma once
/// \file
/// Multi-digit addition on a 4-row scratchpad (Reed & de Freitas 2016, section 4.1), with ADD
/// tail-recursive as in Cai, Shin & Song (2017) so that every invocation has bounded length.
///
/// Rows: 0 first input, 1 second input, 2 carry, 3 output. Each row has a pointer; all start on the
/// rightmost (least significant) column. Column 0 is always blank, so the recursion ends there at
/// the latest. Observation: the value under each of the four pointers (digit 0..9, or 10 for
/// blank).
///
/// Programs and their reference implementations:
///   ADD     if the column is empty: return; else ADD1, LSHIFT, ADD, return
///   ADD1    WRITE(OUT, digit of in1+in2+carry); if that sum >= 10: CARRY; return
///   CARRY   MOVE(CARRY, LEFT), WRITE(CARRY, 1), MOVE(CARRY, RIGHT), return
///   LSHIFT  MOVE(r, LEFT) for r = IN1, IN2, CARRY, OUT; return
///   WRITE(row, value), MOVE(row, dir)   ACTs (dir 0 = left, 1 = right)
/// Input notation: "A+B" with decimal digits, e.g. "25+17".
///
/// `addition-primitive` is the same task with the column's arithmetic done by a primitive
/// (datasets/Primitive.h, kind full adder; learned in primitives/) instead of by the NPI's argument
/// head: one more ACT and one more observation slot.
///   ADD1      FULLADD, WRITE(OUT, REG); if the register holds a carry: CARRY; return
///   FULLADD   ACT: REG = fulladd(in1, in2, carry) of the column (blank reads 0)
///   WRITE(row, REG)   writes the register's sum digit (REG is argument value 10)
/// The fifth observation slot is the register: 0 empty, 1 no carry, 2 carry.

#include "datasets/Primitive.h"
#include "datasets/Task.h"

namespace engram::datasets {

class AdditionTask final : public Task {
 public:
  enum Program { kAdd = 0, kAdd1, kCarry, kLshift, kWrite, kMove, kFullAdd };
  enum Row { kIn1 = 0, kIn2 = 1, kCarryRow = 2, kOut = 3 };
  static constexpr int kBlank = 10;
  static constexpr int kRegister = 10;  ///< WRITE's value argument meaning "the register's digit"

  /// `addition`.
  AdditionTask();
  /// `addition-primitive`, with a full-adder primitive of domain 10 (`reference`: its exact twin
  /// for teach() and solve(); null: the symbolic one). Throws UsageError for another kind or K.
  AdditionTask(std::shared_ptr<const Primitive> digit, std::shared_ptr<const Primitive> reference);
  std::string name() const override { return digit_ ? "addition-primitive" : "addition"; }
  const std::vector<ProgramSpec>& programs() const override { return programs_; }
  int root_program() const override { return kAdd; }
  std::vector<int> observation_sizes() const override;
  int arg_size() const override { return digit_ ? 11 : 10; }
  int min_length() const override { return 1; }
  std::string input_help() const override {
    return "two non-negative decimal numbers joined by '+', e.g. \"25+17\"";
  }
  std::unique_ptr<Environment> make_environment(const std::string& input) const override;
  std::string random_input(int length, std::mt19937_64& rng) const override;
  std::string solve(const std::string& input) const override;
  Limits default_limits(int length) const override;
  Trace teach(const std::string& input) const override;
  std::string format_args(int program, const Args& args) const override;

  /// The bound full adder (addition-primitive only).
  std::shared_ptr<const Primitive> bound_primitive() const override { return digit_; }

 private:
  std::vector<ProgramSpec> programs_;
  std::shared_ptr<const Primitive> digit_, reference_;
};

}  // namespace engram::datasets
