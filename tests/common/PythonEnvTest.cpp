// common/PythonEnv.h: how the benchmarks launch torchrun, from the environment's variables.
#include "common/PythonEnv.h"

#include "common/Subprocess.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

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

TEST(PythonEnv, TorchrunIsTheOneNamedElseBesideThePythonElseThePythonRunsIt) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("engram-python-env-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "with" / "bin");
  std::filesystem::create_directories(dir / "without" / "bin");
  const auto torchrun = dir / "with" / "bin" / "torchrun";
  std::ofstream(torchrun) << "#!/bin/sh\n";
  std::filesystem::permissions(torchrun, std::filesystem::perms::owner_all);
  using Argv = std::vector<std::string>;
  EXPECT_EQ(torchrun_command("", (dir / "with" / "bin" / "python3").string()),
            Argv{torchrun.string()});
  // The python of a system-wide install, whose torchrun (if any) is elsewhere on PATH and may
  // be another Python's: that python runs the launcher itself.
  const std::string system_python = (dir / "without" / "bin" / "python3").string();
  EXPECT_EQ(torchrun_command("", system_python),
            (Argv{system_python, "-m", "torch.distributed.run"}));
  EXPECT_EQ(torchrun_command("", "python3"), (Argv{"python3", "-m", "torch.distributed.run"}));
  EXPECT_EQ(torchrun_command("/opt/x/torchrun", system_python), Argv{"/opt/x/torchrun"});
  {
    ScopedVariable none("ENGRAM_TORCHRUN", std::nullopt);
    EXPECT_EQ(named_torchrun(), "");
  }
  ScopedVariable named("ENGRAM_TORCHRUN", "/opt/x/torchrun");
  EXPECT_EQ(named_torchrun(), "/opt/x/torchrun");
  std::filesystem::remove_all(dir);
}

TEST(PythonEnv, ThePythonRunsTheLauncherOfItsOwnTorchWhereNoTorchrunIsBesideIt) {
  // The form taken for a python without a torchrun beside it starts a job of one process
  // (/bin/true, torchrun's --no-python) on the build's python.
  std::vector<std::string> argv = torchrun_command("", "");
  ASSERT_EQ(argv, (std::vector<std::string>{"", "-m", "torch.distributed.run"}));
  argv[0] = torch_python();
  for (const char* a : {"--nproc_per_node", "1", "--standalone", "--no-python", "true"})
    argv.emplace_back(a);
  ScratchDir dir("python-env");
  ProcessOptions io;
  io.stderr_path = dir.file("err.txt");
  ChildProcess launcher(argv, io);
  ASSERT_TRUE(launcher.wait(25)) << "torch.distributed.run did not end within 25 s";
  EXPECT_TRUE(launcher.succeeded())
      << launcher.outcome() << ": " << last_line(read_file(io.stderr_path));
}

}  // namespace
}  // namespace engram
