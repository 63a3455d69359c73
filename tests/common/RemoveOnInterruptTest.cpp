// What a signal leaves on disk (common/RemoveOnInterrupt.h): a child process writes files and
// folders the way the commands do and is ended by SIGINT or SIGTERM; the parent finds what was in
// progress removed, what was finished kept, one line on stderr per output, and the child ended by
// the signal itself. A signal the process ignores stays ignored.
#include "common/AtomicFile.h"
#include "common/RemoveOnInterrupt.h"
#include "common/Subprocess.h"

#include "tests/support/TempDir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

namespace engram {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::TempDir;

/// Runs `body` in a child process with stderr going to `stderr_path`; returns waitpid's status.
/// The child ends with exit code 99 if `body` returns.
int in_child(const std::string& stderr_path, const std::function<void()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) ::_exit(98);
    try {
      body();
    } catch (...) {
      ::_exit(97);
    }
    ::_exit(99);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

/// A folder as `data stdlib` fills one: packages of many files, with names long enough that
/// reading the folder takes several reads of the kernel's entries.
void fill_folder(const fs::path& folder) {
  for (int package = 0; package < 3; ++package) {
    const fs::path inner = folder / ("package_" + std::to_string(package)) / "inner";
    fs::create_directories(inner);
    for (int f = 0; f < 150; ++f)
      std::ofstream(inner.parent_path() / ("a_function_with_a_rather_long_name_" +
                                           std::to_string(f) + ".py"))
          << "def f():\n    return " << f << "\n";
    std::ofstream(inner / "deep.py") << "x = 1\n";
  }
}

TEST(RemoveOnInterrupt, ASignalRemovesWhatIsInProgressKeepsWhatIsDoneAndEndsTheProcess) {
  for (const int signal : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(signal == SIGINT ? "SIGINT" : "SIGTERM");
    TempDir dir;
    const std::string done = dir.file("done.json"), replaced = dir.file("model.pt"),
                      folder_output = dir.file("corpus");
    testing::write_file(replaced, "the good model");
    ::setenv("TMPDIR", dir.path().c_str(), 1);  // the scratch folder's parent
    const int status = in_child(dir.file("stderr.txt"), [&] {
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      write_file_atomically(done, "{}");  // finished before the signal: kept
      AtomicFile model(replaced, /*binary=*/true);
      model.stream() << "half a mod" << std::flush;
      const fs::path staging = folder_output + ".tmp.partial";
      fs::create_directories(staging);
      const RemoveOnInterrupt remove_staging(staging.string(), /*folder=*/true, folder_output);
      fill_folder(staging);
      const ScratchDir scratch("interrupt-test");
      fill_folder(scratch.path());
      std::raise(signal);
    });
    ::unsetenv("TMPDIR");
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), signal);
    EXPECT_EQ(dir.entries(), (std::set<std::string>{"done.json", "model.pt", "stderr.txt"}));
    EXPECT_EQ(read_file(done), "{}");
    EXPECT_EQ(read_file(replaced), "the good model");
    EXPECT_EQ(read_file(dir.file("stderr.txt")),
              "engram: interrupted while writing '" + replaced +
                  "': it is left as it was\nengram: interrupted while writing '" + folder_output +
                  "': it is left as it was\n");
  }
}

TEST(RemoveOnInterrupt, AnIgnoredSignalStaysIgnoredAndRemovesNothing) {
  TempDir dir;
  const std::string target = dir.file("out.txt");
  const int status = in_child(dir.file("stderr.txt"), [&] {
    std::signal(SIGTERM, SIG_IGN);  // as nohup, or a shell's background job for SIGINT
    AtomicFile file(target);
    file.stream() << "partial" << std::flush;
    std::raise(SIGTERM);
    // Still running: leave the temporary file as the signal found it.
    ::_exit(0);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(dir.entries().count("out.txt"), 0u);
  EXPECT_EQ(dir.entries().size(), 2u) << "the temporary file and stderr.txt";
  EXPECT_EQ(read_file(dir.file("stderr.txt")), "");
}

TEST(RemoveOnInterrupt, WhatItsOwnerReleasedIsNotRemoved) {
  TempDir dir;
  const std::string kept = dir.file("kept");
  const int status = in_child(dir.file("stderr.txt"), [&] {
    std::signal(SIGTERM, SIG_DFL);
    fs::create_directories(kept);
    { const RemoveOnInterrupt released(kept, /*folder=*/true, kept); }
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_TRUE(fs::is_directory(kept));
  EXPECT_EQ(read_file(dir.file("stderr.txt")), "");
  // An empty path, or one too long for the handler's buffers, is not registered.
  EXPECT_FALSE(RemoveOnInterrupt("", false).registered());
  EXPECT_FALSE(RemoveOnInterrupt(std::string(5000, 'x'), false).registered());
  EXPECT_TRUE(RemoveOnInterrupt(dir.file("absent"), false).registered());
}

}  // namespace
}  // namespace engram
