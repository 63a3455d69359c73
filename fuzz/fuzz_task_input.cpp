// Task inputs (--input of engram run, the problems of every task): the first byte picks a task,
// the rest is the input; make_environment, and for an input it accepts, the answer (solve) and the
// reference trace (teach), whose lengths the parsers bound.
#include "datasets/Task.h"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<std::string> names = engram::datasets::task_names();
  if (size == 0 || size > 512) return 0;  // teach() is quadratic for sort: keep inputs short
  const auto& task = engram::datasets::task_by_name(names[data[0] % names.size()]);
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    auto env = task.make_environment(input);
    env->observe();
    task.solve(input);
    task.teach(input);
  } catch (const std::exception&) {
  }
  return 0;
}
