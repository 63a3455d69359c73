#pragma once
/// \file
/// Independent checks of a reference trace: replays it on a fresh environment, verifying every
/// recorded observation, the pre-order of invocations and the final output, and measures it.

#include "datasets/Task.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace engram::testing {

struct TraceStats {
  std::size_t max_invocation_steps = 0;  ///< longest invocation, return step included
  long total_steps = 0;                  ///< model steps of the whole execution
  int max_depth = 0;                     ///< deepest call stack, the root being depth 1
};

inline std::string describe(const datasets::Task& task, const datasets::Trace& trace) {
  return task.name() + " trace of '" + trace.input + "'";
}

/// Success if `trace` is exactly what running its calls on a fresh environment observes and
/// produces; fills `stats` on the way.
inline ::testing::AssertionResult replays(const datasets::Task& task, const datasets::Trace& trace,
                                          TraceStats* stats = nullptr) {
  using ::testing::AssertionFailure;
  const std::string what = describe(task, trace);
  const auto& programs = task.programs();
  if (trace.invocations.empty()) return AssertionFailure() << what << ": no invocations";
  if (trace.invocations[0].program != task.root_program()) {
    return AssertionFailure() << what << ": the root is not the task's root program";
  }
  TraceStats s;
  auto env = task.make_environment(trace.input);
  std::size_t next = 1;
  struct Frame {
    std::size_t invocation, step;
  };
  std::vector<Frame> stack{{0, 0}};
  while (!stack.empty()) {
    s.max_depth = std::max(s.max_depth, static_cast<int>(stack.size()));
    const std::size_t k = stack.back().invocation;
    const std::size_t j = stack.back().step++;
    const datasets::Invocation& inv = trace.invocations[k];
    if (j >= inv.steps.size()) {
      return AssertionFailure() << what << ": invocation " << k << " never returns";
    }
    const datasets::Step& step = inv.steps[j];
    ++s.total_steps;
    if (step.observation != env->observe()) {
      return AssertionFailure() << what << ": invocation " << k << " step " << j
                                << " records an observation the environment does not show";
    }
    if (step.end) {
      if (j + 1 != inv.steps.size()) {
        return AssertionFailure() << what << ": invocation " << k << " has steps after returning";
      }
      s.max_invocation_steps = std::max(s.max_invocation_steps, inv.steps.size());
      stack.pop_back();
      continue;
    }
    if (programs.at(step.callee).is_act) {
      try {
        env->act(step.callee, step.callee_args);
      } catch (const datasets::ActError& e) {
        return AssertionFailure() << what << ": invocation " << k << " step " << j
                                  << " applies an impossible ACT: " << e.what();
      }
      continue;
    }
    if (next >= trace.invocations.size()) {
      return AssertionFailure() << what << ": more subprogram calls than invocations";
    }
    const datasets::Invocation& child = trace.invocations[next];
    if (child.program != step.callee || child.args != step.callee_args) {
      return AssertionFailure() << what << ": invocation " << next
                                << " is not the callee of the call before it";
    }
    stack.push_back({next++, 0});
  }
  if (next != trace.invocations.size()) {
    return AssertionFailure() << what << ": " << trace.invocations.size() - next
                              << " invocations are never called";
  }
  if (env->result() != trace.output) {
    return AssertionFailure() << what << ": replay ends with '" << env->result()
                              << "', the trace says '" << trace.output << "'";
  }
  if (stats) *stats = s;
  return ::testing::AssertionSuccess();
}

}  // namespace engram::testing
