#pragma once
/// \file
/// Bubble sort on an array with three pointers (Reed & de Freitas 2016, section 4.2). Pointer 1 and
/// pointer 2 walk the array comparing neighbours; pointer 3 counts passes (the sort ends when it
/// runs off the array). Observation: the value under each pointer (digit 0..9, or 10 off the
/// array). Pointers range over [-1, n]; all start at 0.
///
/// Iterative (`sort`, as in the paper):
///   BUBBLESORT  while pointer 3 is on the array: BUBBLE, RESET; return
///   BUBBLE      PTR(2, RIGHT); while pointer 2 is on the array: BSTEP; return
///   RESET       while pointer 1 is on the array: LSHIFT; PTR(1, RIGHT), PTR(3, RIGHT); return
/// Recursive (`sort-recursive`, as in Cai, Shin & Song 2017): every invocation has bounded length.
///   BUBBLESORT  if pointer 3 is off the array: return; PTR(2, RIGHT), BUBBLE, RESET, BUBBLESORT
///   BUBBLE      if pointer 2 is off the array: return; BSTEP, BUBBLE
///   RESET       if pointer 1 is off the array: PTR(1, RIGHT), PTR(3, RIGHT); else LSHIFT, RESET
/// Shared:
///   BSTEP       COMPSWAP, RSHIFT
///   COMPSWAP    if value(1) > value(2): SWAP(1, 2)
///   LSHIFT      PTR(1, LEFT), PTR(2, LEFT);   RSHIFT  PTR(1, RIGHT), PTR(2, RIGHT)
///   PTR(p, dir), SWAP(p, q)   ACTs; pointers are numbered from 0 in arguments, dir 0 = left
/// Input notation: comma-separated digits, e.g. "3,1,2".

#include "datasets/Task.h"

namespace engram::datasets {

class SortTask final : public Task {
 public:
  enum Program {
    kBubblesort = 0,
    kBubble,
    kReset,
    kBstep,
    kCompswap,
    kLshift,
    kRshift,
    kPtr,
    kSwap
  };
  static constexpr int kBlank = 10;

  explicit SortTask(bool recursive);
  std::string name() const override { return recursive_ ? "sort-recursive" : "sort"; }
  const std::vector<ProgramSpec>& programs() const override { return programs_; }
  int root_program() const override { return kBubblesort; }
  std::vector<int> observation_sizes() const override { return {11, 11, 11}; }
  int arg_size() const override { return 3; }
  int min_length() const override { return 2; }
  /// A length-n trace has about 17 n^2 steps: 1000 is some 17 million, about a gigabyte.
  int max_teach_length() const override { return 1000; }
  std::string input_help() const override { return "comma-separated digits 0..9, e.g. \"3,1,2\""; }
  std::unique_ptr<Environment> make_environment(const std::string& input) const override;
  std::string random_input(int length, std::mt19937_64& rng) const override;
  std::string solve(const std::string& input) const override;
  Limits default_limits(int length) const override;
  Trace teach(const std::string& input) const override;
  std::string format_args(int program, const Args& args) const override;

 private:
  bool recursive_;
  std::vector<ProgramSpec> programs_;
};

}  // namespace engram::datasets
