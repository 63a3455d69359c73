// common/PythonEnv.h: which torchrun the benchmarks start, from the environment's variables.
#include "common/PythonEnv.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace engram {
namespace {

/// Sets (or, for nullopt, unsets) a variable for the test's life, then restores it.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* before = std::getenv(name)) before_ = before;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedVariable() {
    if (before_)
      ::setenv(name_, before_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> before_;
};

TEST(PythonEnv, TorchrunIsBesideThePythonElseOnThePathUnlessNamed) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("engram-python-env-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "with" / "bin");
  std::filesystem::create_directories(dir / "without" / "bin");
  const auto torchrun = dir / "with" / "bin" / "torchrun";
  std::ofstream(torchrun) << "#!/bin/sh\n";
  std::filesystem::permissions(torchrun, std::filesystem::perms::owner_all);
  {
    ScopedVariable no_torchrun("ENGRAM_TORCHRUN", std::nullopt);
    {
      ScopedVariable python("ENGRAM_PYTHON", (dir / "with" / "bin" / "python3").string());
      EXPECT_EQ(torchrun_program(), torchrun.string());
    }
    {
      // The python of a system-wide install, whose torchrun is elsewhere on PATH.
      ScopedVariable python("ENGRAM_PYTHON", (dir / "without" / "bin" / "python3").string());
      EXPECT_EQ(torchrun_program(), "torchrun");
    }
    ScopedVariable python("ENGRAM_PYTHON", "python3");
    EXPECT_EQ(torchrun_program(), "torchrun");
  }
  ScopedVariable named("ENGRAM_TORCHRUN", "/opt/x/torchrun");
  EXPECT_EQ(torchrun_program(), "/opt/x/torchrun");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace engram
