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

std::string named_torchrun() { return from_environment("ENGRAM_TORCHRUN", ""); }

std::vector<std::string> torchrun_command(const std::string& torchrun, const std::string& python) {
  if (!torchrun.empty()) return {torchrun};
  const auto slash = python.rfind('/');
  if (slash != std::string::npos) {
    const std::string beside = python.substr(0, slash + 1) + "torchrun";
    if (::access(beside.c_str(), X_OK) == 0) return {beside};
  }
  return {python, "-m", "torch.distributed.run"};
}

}  // namespace engram
