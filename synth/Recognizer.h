#pragma once
/// \file
/// Recovering the high-order program from a trace (synth/Trace.h): which of MAP, FILTER, FOLD,
/// SCAN and ZIPWITH the code computed, in what composition, and each stage's element computation
/// as a Template (synth/Template.h).
///
/// The rules, on the dataflow graph of one run:
/// - A list result equal to an input list is that list; equal to the successive values of an
///   accumulator (a variable bound before a loop and rebound in it) it is a SCAN of the
///   accumulator's elements.
/// - Otherwise each output element is followed back to the one input element (or accumulator
///   value) it comes from: elements of one list are a pipeline of FILTERs and MAPs, split where a
///   value is tested (the tested value ends a MAP) or kept in a list the code built; elements of
///   two lists at the same position are a ZIPWITH, and what each side computed alone before
///   they meet is a MAP of that side.
/// - A number result is the final value of an accumulator: a FOLD. Each iteration combines the
///   accumulator with one element (what the update computed without the accumulator), so the
///   elements form the sequence the FOLD runs over; a selection (if x > acc: acc = x; max, min)
///   combines by its branches. Without an initial value in the code (reduce without one,
///   max(xs)) the first element starts the accumulator, and the initial value is the
///   combiner's identity.
/// - `% K` applied to a sum or product after it is accumulated (sum(...) % K) is moved into
///   the accumulation, where modular arithmetic allows it (the combiner adds, subtracts or
///   multiplies, and no branch tests the unreduced values).
/// Every run must give the same program; element computations merge their paths over runs.
/// Code outside these patterns throws InputError naming the line.

#include "synth/Template.h"
#include "synth/Trace.h"

#include <string>
#include <vector>

namespace engram::synth {

struct Stage {
  enum class Kind { kUnknown, kInput, kMap, kFilter, kFold, kScan, kZipWith };
  Kind kind = Kind::kUnknown;
  int list = 0;  ///< kInput: 0 xs, 1 ys
  /// kMap: the value (parameter x0); kFilter: whether the element goes on; kFold, kScan: the
  /// combiner of the accumulator x0 and the element x1; kZipWith: of x0 (xs side), x1 (ys side).
  Template fn;
  bool identity_init = false;  ///< kFold, kScan: the code gave no initial value
  std::int64_t init = 0;
  bool reduce_mod_k = false;  ///< kFold, kScan, kMap: the code's later % K, moved in
  std::vector<Stage> inputs;
  std::string where;  ///< "line 7"

  /// Structure only, for messages and tests: e.g. "fold(map(xs))".
  std::string shape() const;
};

/// "map", "filter", "fold", "scan", "zipwith", "input", "?".
std::string stage_kind_name(Stage::Kind kind);

/// The program all runs agree on; throws InputError (common/Errors.h) where the code leaves
/// the patterns above, or where runs disagree.
Stage recognize(const Trace& trace);

}  // namespace engram::synth
