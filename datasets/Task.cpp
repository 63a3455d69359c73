#include "datasets/Task.h"

#include "datasets/AdditionTask.h"
#include "datasets/ListTask.h"
#include "datasets/SortTask.h"

#include <functional>

namespace engram::datasets {

bool Step::operator==(const Step& other) const {
  return observation == other.observation && end == other.end &&
         (end || (callee == other.callee && callee_args == other.callee_args));
}

bool Invocation::operator==(const Invocation& other) const {
  return program == other.program && args == other.args && steps == other.steps;
}

bool Trace::operator==(const Trace& other) const {
  return input == other.input && output == other.output && invocations == other.invocations;
}

int Task::program_index(const std::string& name) const {
  const auto& progs = programs();
  for (size_t i = 0; i < progs.size(); ++i) {
    if (progs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Task::format_args(int program, const Args& args) const {
  if (!programs().at(program).is_act) return "";
  return std::to_string(args[0]) + ", " + std::to_string(args[1]) + ", " + std::to_string(args[2]);
}

void Task::check_teach_length(long length, const std::string& what) const {
  if (length > max_teach_length()) {
    throw InputError(what + " " + std::to_string(length) + " is longer than the " +
                     std::to_string(max_teach_length()) + " that reference programs of " + name() +
                     " run to");
  }
}

void Task::check_length_option(long length, const std::string& field) const {
  if (length > max_teach_length()) {
    throw InvalidOption(field, std::to_string(length) + " is longer than the " +
                                   std::to_string(max_teach_length()) +
                                   " that reference programs of " + name() + " run to");
  }
}

std::vector<std::string> task_names() {
  std::vector<std::string> names{"addition", "addition-primitive", "sort", "sort-recursive"};
  for (const auto& name : higher_order_task_names()) names.push_back(name);
  return names;
}

const Task& task_by_name(const std::string& name) {
  static const AdditionTask addition;
  static const SortTask sort(/*recursive=*/false);
  static const SortTask sort_recursive(/*recursive=*/true);
  if (name == "addition") return addition;
  if (name == "addition-primitive") {
    static const AdditionTask with_primitive(nullptr, nullptr);  // the symbolic full adder
    return with_primitive;
  }
  if (name == "sort") return sort;
  if (name == "sort-recursive") return sort_recursive;
  if (is_higher_order(name)) {
    // The default binding (datasets/ListTask.h): enough for everything but running a problem
    // with a chosen primitive, which takes bind_task().
    static const HigherOrderTask map(HigherOrder::kMap, {}), filter(HigherOrder::kFilter, {}),
        fold(HigherOrder::kFold, {}), zipwith(HigherOrder::kZipWith, {}),
        scan(HigherOrder::kScan, {});
    const HigherOrderTask* all[] = {&map, &filter, &fold, &zipwith, &scan};
    for (const auto* task : all) {
      if (task->name() == name) return *task;
    }
  }
  std::string known;
  for (const auto& n : task_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown task '" + name + "' (known tasks: " + known + ")");
}

std::vector<Call> call_sequence(const Trace& trace, const std::vector<ProgramSpec>& programs) {
  std::vector<Call> calls;
  if (trace.invocations.empty()) return calls;
  size_t next_invocation = 1;
  // Iterative walk: (invocation index, next step) frames, so very deep recursion is safe.
  struct Frame {
    size_t invocation;
    size_t step;
  };
  std::vector<Frame> stack{{0, 0}};
  calls.push_back({trace.invocations[0].program, trace.invocations[0].args, 0});
  while (!stack.empty()) {
    Frame& frame = stack.back();
    const auto& inv = trace.invocations[frame.invocation];
    if (frame.step >= inv.steps.size() || inv.steps[frame.step].end) {
      stack.pop_back();
      continue;
    }
    const Step& step = inv.steps[frame.step++];
    const int depth = static_cast<int>(stack.size());
    calls.push_back({step.callee, step.callee_args, depth});
    if (!programs.at(step.callee).is_act) {
      if (next_invocation >= trace.invocations.size()) break;  // truncated trace
      stack.push_back({next_invocation++, 0});
    }
  }
  return calls;
}

}  // namespace engram::datasets
