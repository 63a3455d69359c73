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
/// and runs `body(program, args)`, which the task supplies. A body's recursive call in tail
/// position (its last call: ADD calling ADD for the next column) goes through `tail_call()`, which
/// records the same trace without a C++ stack frame per level, so a 10,000-digit addition does not
/// need a deep stack (it overflowed under AddressSanitizer's larger frames).
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

  /// Records a call step as call() does, to be the body's last call before ret(): a non-ACT
  /// callee runs once the body has returned, and this invocation's end step is recorded when the
  /// callee's is (nothing can happen between the two), which is the trace call() would record.
  void tail_call(int program, const Args& args = {0, 0, 0}) {
    if (programs_.at(program).is_act) {
      call(program, args);
      return;
    }
    Step step;
    step.observation = env_.observe();
    step.callee = program;
    step.callee_args = args;
    trace_.invocations[stack_.back()].steps.push_back(std::move(step));
    tail_ = {program, args};
    has_tail_ = true;
  }

  /// Records the final (returning) step of the current invocation (after a tail_call, once the
  /// callee has returned).
  void ret() {
    if (has_tail_) {
      returns_after_tail_.push_back(stack_.back());
      return;
    }
    record_end(stack_.back());
  }

  const Environment& env() const { return env_; }

 private:
  /// Runs an invocation, and the chain of invocations its body tail-calls, in a loop; then the
  /// end steps of the chain's callers, innermost first.
  void enter(int program, const Args& args) {
    Args current = args;
    std::size_t waiting = 0;
    while (true) {
      stack_.push_back(static_cast<int>(trace_.invocations.size()));
      trace_.invocations.push_back(Invocation{program, current, {}});
      has_tail_ = false;
      body_(program, current);
      stack_.pop_back();
      if (!has_tail_) break;
      has_tail_ = false;
      program = tail_.first;
      current = tail_.second;
      ++waiting;
    }
    for (; waiting > 0; --waiting) {
      record_end(returns_after_tail_.back());
      returns_after_tail_.pop_back();
    }
  }

  void record_end(int invocation) {
    Step step;
    step.observation = env_.observe();
    step.end = true;
    trace_.invocations[invocation].steps.push_back(std::move(step));
  }

  const std::vector<ProgramSpec>& programs_;
  Environment& env_;
  Trace& trace_;
  Body body_;
  std::vector<int> stack_;
  std::pair<int, Args> tail_{0, {0, 0, 0}};  ///< the pending tail call, when has_tail_
  bool has_tail_ = false;
  std::vector<int> returns_after_tail_;  ///< invocations whose end waits for their tail callee
};

}  // namespace engram::datasets
