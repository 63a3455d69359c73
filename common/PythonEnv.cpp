#include "common/PythonEnv.h"

#include <unistd.h>

#include <cstdlib>

namespace engram {
namespace {

std::string from_environment(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace

std::string torch_python() { return from_environment("ENGRAM_PYTHON", ENGRAM_BUILD_PYTHON); }

std::string torchrun_program() {
  const std::string python = torch_python();
  const auto slash = python.rfind('/');
  std::string beside =
      slash == std::string::npos ? "torchrun" : python.substr(0, slash + 1) + "torchrun";
  // A system-wide pip puts torchrun in /usr/local/bin, not beside /usr/bin/python3: then the
  // one on PATH (the children start with posix_spawnp).
  if (beside.find('/') != std::string::npos && ::access(beside.c_str(), X_OK) != 0)
    beside = "torchrun";
  return from_environment("ENGRAM_TORCHRUN", beside);
}

}  // namespace engram
