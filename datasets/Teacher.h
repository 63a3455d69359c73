#pragma once
/// \file
/// Internal helper for reference programs: records a Trace while a C++ implementation of the
/// program runs on an environment. Not part of the public API of `datasets`.

#include "datasets/Task.h"

#include <functional>
#include <utility>
#include <vector>

namespace engram::datasets {

/// Records invocations as a reference program executes.
///
/// A reference program body calls `call()` for each step and `ret()` once at its end:
/// \code
///   void add1(TraceRecorder& rec) { rec.call(kWrite, {kOut, digit, 0}); rec.ret(); }
/// \endcode
/// `call()` on an ACT applies it to the environment; on any other program it opens a new invocation
/// and runs `body(program, args)`, which the task supplies.
class TraceRecorder {
 public:
  using Body = std::function<void(int program, const Args& args)>;

  TraceRecorder(const std::vector<ProgramSpec>& programs, Environment& env, Trace& trace)
      : programs_(programs), env_(env), trace_(trace) {}

  void set_body(Body body) { body_ = std::move(body); }

  /// Starts the root invocation and runs it to completion.
  void run_root(int program, const Args& args = {0, 0, 0}) { enter(program, args); }

  /// Records a call step in the current invocation and executes it.
  void call(int program, const Args& args = {0, 0, 0}) {
    Step step;
    step.observation = env_.observe();
    step.callee = program;
    step.callee_args = args;
    trace_.invocations[stack_.back()].steps.push_back(std::move(step));
    if (programs_.at(program).is_act) {
      env_.act(program, args);
    } else {
      enter(program, args);
    }
  }

  /// Records the final (returning) step of the current invocation.
  void ret() {
    Step step;
    step.observation = env_.observe();
    step.end = true;
    trace_.invocations[stack_.back()].steps.push_back(std::move(step));
  }

  const Environment& env() const { return env_; }

 private:
  void enter(int program, const Args& args) {
    stack_.push_back(static_cast<int>(trace_.invocations.size()));
    trace_.invocations.push_back(Invocation{program, args, {}});
    body_(program, args);
    stack_.pop_back();
  }

  const std::vector<ProgramSpec>& programs_;
  Environment& env_;
  Trace& trace_;
  Body body_;
  std::vector<int> stack_;
};

}  // namespace engram::datasets
