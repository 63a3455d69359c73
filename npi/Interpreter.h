#pragma once
/// \file
/// Runs a trained NPI on problems: the learned programs call each other (and themselves) with a
/// fresh core state per call, ACT programs change the environment. Many problems run together, one
/// batched model step per tick, whatever program each of them is in (the core is shared by all
/// programs), so evaluation of long problems stays fast. No C++ recursion: call stacks are
/// explicit, so deep recursion (length-1000 addition nests 1000 calls) is safe.

#include "datasets/Task.h"
#include "npi/NpiModel.h"

#include <string>
#include <vector>

namespace engram::npi {

struct InterpretOptions {
  long max_steps = 0;  ///< 0: the task's default for each problem's length
  int max_depth = 0;   ///< 0: the task's default for each problem's length
};

/// The outcome of running one problem.
struct Execution {
  std::string input;
  std::string output;                 ///< the environment's result when the run stopped
  std::string error;                  ///< empty when the root program returned normally
  std::vector<datasets::Call> calls;  ///< the generated program, in execution order with depths
  long steps = 0;
};

/// Runs the task's root program on every input. Inputs must already be valid (make_environment
/// throws InputError otherwise).
std::vector<Execution> interpret(NpiModel& model, const datasets::Task& task,
                                 const std::vector<std::string>& inputs,
                                 const InterpretOptions& options = {});

}  // namespace engram::npi
