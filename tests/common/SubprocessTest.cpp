// common/Subprocess.h: the scratch folder, reading output back, and child processes (output to
// files, environment, exit codes and signals, time limits, failures to start, no orphans, a
// group of children that fails together).
#include "common/Subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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
  EXPECT_EQ(child.signal_number(), 0);
  EXPECT_EQ(read_file(io.stdout_path), "to-out\n");
  EXPECT_EQ(last_line(read_file(io.stderr_path)), "to-err");

  // stdin is /dev/null by default: cat ends at once instead of waiting for a terminal.
  ProcessOptions quiet;
  quiet.stdout_path = dir.file("cat");
  ChildProcess cat({"cat"}, quiet);
  ASSERT_TRUE(cat.wait(30));
  EXPECT_TRUE(cat.succeeded());
  EXPECT_EQ(read_file(quiet.stdout_path), "");
  std::ofstream(dir.file("in")) << "fed\n";
  quiet.stdin_path = dir.file("in");
  ChildProcess fed({"cat"}, quiet);
  ASSERT_TRUE(fed.wait(30));
  EXPECT_EQ(read_file(quiet.stdout_path), "fed\n");

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
  // `env` lists the environment as it is, duplicates included (a shell would keep one of them,
  // getenv() the first).
  ChildProcess child({"env"}, io);
  ASSERT_TRUE(child.wait(30));
  std::vector<std::string> ours;
  std::istringstream lines(read_file(io.stdout_path));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("ENGRAM_SUBPROCESS_", 0) == 0) ours.push_back(line);
  std::sort(ours.begin(), ours.end());
  EXPECT_EQ(ours,
            (std::vector<std::string>{"ENGRAM_SUBPROCESS_ADDED=added",
                                      "ENGRAM_SUBPROCESS_KEEP=kept", "ENGRAM_SUBPROCESS_SET=new"}));
}

TEST(Subprocess, MovingAChildKeepsItRunning) {
  // A vector that grows moves its children; a moved-from object must not end the child.
  std::vector<ChildProcess> children;
  for (int i = 0; i < 5; ++i)
    children.push_back(ChildProcess({"sh", "-c", "sleep 0.3; exit 4"}, ProcessOptions{}));
  for (auto& child : children) {
    ASSERT_TRUE(child.wait(30));
    EXPECT_EQ(child.exit_code(), 4) << child.outcome();
  }
  pid_t pid = -1;
  {
    ChildProcess first({"sleep", "30"}, ProcessOptions{});
    pid = first.pid();
    ChildProcess second(std::move(first));
    EXPECT_EQ(second.pid(), pid);
    { ChildProcess gone(std::move(second)); }  // kills it
    EXPECT_EQ(::kill(pid, 0), -1);
  }
}

TEST(Subprocess, ATimeLimitLeavesTheChildRunningUntilKilled) {
  ChildProcess child({"sleep", "30"}, ProcessOptions{});
  EXPECT_FALSE(child.wait(0.1));
  EXPECT_EQ(child.outcome(), "is still running");
  EXPECT_EQ(child.exit_code(), -1);
  child.kill();
  EXPECT_EQ(child.outcome(), "was killed by signal 9");
  EXPECT_EQ(child.signal_number(), SIGKILL);
  EXPECT_FALSE(child.succeeded());
  EXPECT_TRUE(child.wait(0.1));  // ended already
}

TEST(Subprocess, PollDoesNotWait) {
  ChildProcess child({"sleep", "30"}, ProcessOptions{});
  EXPECT_FALSE(child.poll());
  child.kill();
  EXPECT_TRUE(child.poll());
  ChildProcess done({"sh", "-c", "exit 6"}, ProcessOptions{});
  ASSERT_TRUE(done.wait(30));
  EXPECT_TRUE(done.poll());
  EXPECT_EQ(done.exit_code(), 6);
}

TEST(Subprocess, WaitingForAllEndsTheOthersWhenOneFails) {
  // As torchrun: the second child fails after a moment, and the first and third, which would
  // otherwise run for 30 s (a rank waiting in a collective for the failed one), end with it.
  std::vector<ChildProcess> children;
  children.push_back(ChildProcess({"sleep", "30"}, ProcessOptions{}));
  children.push_back(ChildProcess({"sh", "-c", "sleep 0.2; exit 3"}, ProcessOptions{}));
  children.push_back(ChildProcess({"sleep", "30"}, ProcessOptions{}));
  const auto start = std::chrono::steady_clock::now();
  const auto failed = wait_all(children);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(*failed, 1u);
  EXPECT_EQ(children[1].exit_code(), 3);
  EXPECT_EQ(children[0].signal_number(), SIGKILL) << children[0].outcome();
  EXPECT_EQ(children[2].signal_number(), SIGKILL) << children[2].outcome();
}

TEST(Subprocess, WaitingForAllNamesTheFirstFailureInTime) {
  // The later child fails first; a child that fails afterwards, or is killed, is not the cause.
  std::vector<ChildProcess> children;
  children.push_back(ChildProcess({"sh", "-c", "sleep 1; exit 4"}, ProcessOptions{}));
  children.push_back(ChildProcess({"sh", "-c", "exit 5"}, ProcessOptions{}));
  const auto failed = wait_all(children);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(*failed, 1u);
  EXPECT_EQ(children[1].exit_code(), 5);
  EXPECT_FALSE(children[0].succeeded());
}

TEST(Subprocess, WaitingForAllThatSucceedWaitsForEach) {
  std::vector<ChildProcess> children;
  for (double seconds : {0.3, 0.0, 0.1})
    children.push_back(
        ChildProcess({"sh", "-c", "sleep " + std::to_string(seconds)}, ProcessOptions{}));
  EXPECT_FALSE(wait_all(children).has_value());
  for (auto& child : children) EXPECT_TRUE(child.succeeded()) << child.outcome();
  std::vector<ChildProcess> none;
  EXPECT_FALSE(wait_all(none).has_value());
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
