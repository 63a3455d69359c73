// common/Subprocess.h: the scratch folder, reading output back, and child processes (output to
// files, environment, exit codes and signals, time limits, failures to start, no orphans).
#include "common/Subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace engram {
namespace {

TEST(Subprocess, TheScratchFolderIsPrivateAndRemovedWithItsFiles) {
  std::filesystem::path kept;
  {
    ScratchDir dir("test");
    kept = dir.path();
    EXPECT_TRUE(std::filesystem::is_directory(kept));
    EXPECT_EQ(kept.filename().string().rfind("engram-test-", 0), 0u) << kept;
    EXPECT_EQ(std::filesystem::path(dir.file("a.txt")).parent_path(), kept);
    std::ofstream(dir.file("a.txt")) << "x";
    std::filesystem::create_directory(kept / "sub");
    std::ofstream((kept / "sub" / "b.txt").string()) << "y";
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(Subprocess, LastLineSkipsBlankLines) {
  EXPECT_EQ(last_line("first\nsecond\n\n  \n"), "second");
  EXPECT_EQ(last_line("only"), "only");
  EXPECT_EQ(last_line("\n \t\n"), "");
  EXPECT_EQ(read_file("/nonexistent/engram/file"), "");
}

TEST(Subprocess, OutputGoesToFilesAndTheExitCodeComesBack) {
  ScratchDir dir("test");
  ProcessOptions io;
  io.stdout_path = dir.file("out");
  io.stderr_path = dir.file("err");
  ChildProcess child({"sh", "-c", "echo to-out; echo to-err >&2; exit 3"}, io);
  EXPECT_GT(child.pid(), 0);
  EXPECT_TRUE(child.wait());
  EXPECT_FALSE(child.succeeded());
  EXPECT_EQ(child.exit_code(), 3);
  EXPECT_EQ(child.outcome(), "exited with 3");
  EXPECT_EQ(read_file(io.stdout_path), "to-out\n");
  EXPECT_EQ(last_line(read_file(io.stderr_path)), "to-err");

  ChildProcess ok({"true"}, ProcessOptions{});
  EXPECT_TRUE(ok.wait(10));
  EXPECT_TRUE(ok.succeeded());
  EXPECT_EQ(ok.exit_code(), 0);
}

TEST(Subprocess, TheEnvironmentIsInheritedWithChanges) {
  ScratchDir dir("test");
  ::setenv("ENGRAM_SUBPROCESS_KEEP", "kept", 1);
  ::setenv("ENGRAM_SUBPROCESS_DROP", "dropped", 1);
  ::setenv("ENGRAM_SUBPROCESS_SET", "old", 1);
  ProcessOptions io;
  io.stdout_path = dir.file("out");
  io.unset_environment = {"ENGRAM_SUBPROCESS_DROP"};
  io.set_environment = {{"ENGRAM_SUBPROCESS_SET", "new"}, {"ENGRAM_SUBPROCESS_ADDED", "added"}};
  ChildProcess child({"sh", "-c",
                      "echo $ENGRAM_SUBPROCESS_KEEP-${ENGRAM_SUBPROCESS_DROP:-none}-"
                      "$ENGRAM_SUBPROCESS_SET-$ENGRAM_SUBPROCESS_ADDED"},
                     io);
  ASSERT_TRUE(child.wait(30));
  EXPECT_EQ(read_file(io.stdout_path), "kept-none-new-added\n");
}

TEST(Subprocess, ATimeLimitLeavesTheChildRunningUntilKilled) {
  ChildProcess child({"sleep", "30"}, ProcessOptions{});
  EXPECT_FALSE(child.wait(0.1));
  EXPECT_EQ(child.outcome(), "is still running");
  EXPECT_EQ(child.exit_code(), -1);
  child.kill();
  EXPECT_EQ(child.outcome(), "was killed by signal 9");
  EXPECT_FALSE(child.succeeded());
  EXPECT_TRUE(child.wait(0.1));  // ended already
}

TEST(Subprocess, NoChildOutlivesItsOwner) {
  pid_t pid = -1;
  {
    ChildProcess child({"sleep", "30"}, ProcessOptions{});
    pid = child.pid();
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  EXPECT_EQ(::kill(pid, 0), -1);  // killed and reaped: no such process
  EXPECT_EQ(errno, ESRCH);
}

TEST(Subprocess, AProgramThatCannotStartIsAClearError) {
  try {
    ChildProcess child({"/nonexistent/engram-program"}, ProcessOptions{});
    FAIL() << "started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot start /nonexistent/engram-program"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ChildProcess({}, ProcessOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace engram
