#pragma once
/// \file
/// Tasks for neural program induction: an environment, the programs that act on it, and a
/// reference program (the "teacher") that produces execution traces.
///
/// Usage:
/// \code
///   const auto& task = engram::datasets::task_by_name("addition");
///   std::mt19937_64 rng(1);
///   std::string input = task.random_input(/*length=*/5, rng);      // e.g. "31415+92653"
///   engram::datasets::Trace trace = task.teach(input);              // reference execution
///   auto env = task.make_environment(input);                        // fresh scratchpad
///   // ... an interpreter observes env->observe() and calls env->act(program, args) ...
///   bool ok = env->result() == task.solve(input);
/// \endcode
///
/// This module knows nothing of models: observations are small categorical vectors and programs are
/// integers indexing `Task::programs()`.

#include "common/Errors.h"

#include <array>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::datasets {

class Primitive;

/// Every call carries three integer arguments, as in Reed & de Freitas (2016).
constexpr int kNumArgs = 3;
using Args = std::array<int, kNumArgs>;

/// An ACT that cannot be applied (pointer moved off the tape, write out of range). A runtime error
/// of the program being executed, not of the user.
class ActError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One entry of a task's program memory.
struct ProgramSpec {
  std::string name;
  /// ACT programs change the environment and return at once; others run as learned subroutines.
  bool is_act = false;
};

/// The mutable world a program runs in (scratchpad, array with pointers, ...).
class Environment {
 public:
  virtual ~Environment() = default;
  /// One categorical value per slot, each in [0, Task::observation_sizes()[slot]).
  virtual std::vector<int> observe() const = 0;
  /// Applies the ACT program `program` with `args`; throws ActError if it cannot be applied.
  virtual void act(int program, const Args& args) = 0;
  /// The answer currently held by the environment, in the task's output notation.
  virtual std::string result() const = 0;
  /// The problem length (digits, list elements) that limits scale with.
  virtual int length() const = 0;
};

/// Bounds that stop a runaway program; both scale with the problem length.
struct Limits {
  long max_steps = 0;  ///< model steps over the whole execution, returns included
  int max_depth = 0;   ///< call-stack depth, the root program being depth 1
};

/// A step of one program invocation: what was observed and what the program did next.
struct Step {
  std::vector<int> observation;
  bool end = false;  ///< true: the program returns at this step (no call)
  int callee = -1;   ///< program called at this step when !end
  Args callee_args{0, 0, 0};
  bool operator==(const Step& other) const;
};

/// One activation of a program: each gets a fresh core state, so it is an independent training
/// sequence (what the parent sees of the child is only the changed environment).
struct Invocation {
  int program = 0;
  Args args{0, 0, 0};
  std::vector<Step> steps;
  bool operator==(const Invocation& other) const;
};

/// A whole execution. `invocations` are in pre-order: the callee of the k-th non-ACT call step
/// (counted in execution order) is invocation k+1.
struct Trace {
  std::string input;
  std::string output;
  std::vector<Invocation> invocations;
  bool operator==(const Trace& other) const;
};

/// One call in execution order: the root first (depth 0), then every call step.
struct Call {
  int program = 0;
  Args args{0, 0, 0};
  int depth = 0;
  bool operator==(const Call& other) const {
    return program == other.program && args == other.args && depth == other.depth;
  }
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual const std::vector<ProgramSpec>& programs() const = 0;
  virtual int root_program() const = 0;
  /// Cardinality of each observation slot.
  virtual std::vector<int> observation_sizes() const = 0;
  /// Each argument lies in [0, arg_size()).
  virtual int arg_size() const = 0;
  /// Smallest problem length `random_input` accepts.
  virtual int min_length() const = 0;
  /// Longest problem the reference program (`teach`) runs: it recurses on the C++ stack, one call
  /// per element, and records every step, so it also bounds `random_input` (and with it `eval` and
  /// `data gen`). Interpreting longer inputs is fine.
  virtual int max_teach_length() const { return 10000; }
  /// One line describing the input notation, for help and error messages.
  virtual std::string input_help() const = 0;

  /// Parses `input` into a fresh environment; throws InputError if malformed.
  virtual std::unique_ptr<Environment> make_environment(const std::string& input) const = 0;
  /// A uniformly random problem of the given length in input notation.
  virtual std::string random_input(int length, std::mt19937_64& rng) const = 0;
  /// The ground-truth answer, computed directly (not by running a program).
  virtual std::string solve(const std::string& input) const = 0;
  /// Defaults that let a correct program finish on a problem of this length and stop a runaway one.
  virtual Limits default_limits(int length) const = 0;
  /// Runs the reference program on `input` and records its execution trace; throws InputError
  /// for problems longer than max_teach_length().
  virtual Trace teach(const std::string& input) const = 0;

  /// The primitive the task's ACTs apply (datasets/Primitive.h), or null for tasks without one.
  virtual std::shared_ptr<const Primitive> bound_primitive() const { return nullptr; }

  /// Arguments of a call as a reader would write them, e.g. "OUT, 7" (empty for no arguments).
  virtual std::string format_args(int program, const Args& args) const;

  /// Throws InputError if length > max_teach_length(); `what` names the option in the message.
  void check_teach_length(long length, const std::string& what) const;
  /// The same check for an option: throws InvalidOption(`field`, "<length> is longer than ...").
  void check_length_option(long length, const std::string& field) const;

  /// Index of the program called `name`, or -1.
  int program_index(const std::string& name) const;
};

/// All task names, in a stable order.
std::vector<std::string> task_names();
/// The task called `name`; throws InputError listing the known tasks otherwise.
const Task& task_by_name(const std::string& name);

/// Calls in execution order, derived from the invocation tree.
std::vector<Call> call_sequence(const Trace& trace, const std::vector<ProgramSpec>& programs);

}  // namespace engram::datasets
