// The real `engram` binary as a subprocess: exit codes and what reaches stdout and stderr.
#include "tests/support/TempDir.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace engram {
namespace {

using testing::read_file;
using testing::TempDir;

struct Process {
  int code = -1;
  std::string out, err;
};

class EngramBinaryTest : public ::testing::Test {
 protected:
  /// Runs the binary with `args` (no shell metacharacters in them), stdout and stderr to files.
  Process run(const std::vector<std::string>& args) {
    std::string command = std::string("'") + ENGRAM_BINARY + "'";
    for (const auto& a : args) command += " '" + a + "'";
    const std::string out = dir_.file("stdout"), err = dir_.file("stderr");
    command += " >'" + out + "' 2>'" + err + "' </dev/null";
    const int status = std::system(command.c_str());
    Process p;
    p.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    p.out = read_file(out);
    p.err = read_file(err);
    return p;
  }
  void expect_one_error_line(const Process& p, int code) {
    EXPECT_EQ(p.code, code) << p.err;
    EXPECT_EQ(std::count(p.err.begin(), p.err.end(), '\n'), 1) << "stderr: " << p.err;
    EXPECT_EQ(p.err.rfind("engram: error: ", 0), 0u) << p.err;
    EXPECT_EQ(p.out, "");
  }

  TempDir dir_;
};

TEST_F(EngramBinaryTest, HelpSucceedsOnStdout) {
  const Process p = run({"help"});
  EXPECT_EQ(p.code, 0);
  EXPECT_NE(p.out.find("train"), std::string::npos) << p.out;
  EXPECT_EQ(p.err, "");
}

TEST_F(EngramBinaryTest, ErrorsAreOneLineOnStderrWithTheirExitCode) {
  expect_one_error_line(run({"--bogus"}), 2);
  expect_one_error_line(
      run({"run", "--model", dir_.file("m.pt"), "--task", "addition", "--input", "12+"}), 2);
  expect_one_error_line(
      run({"run", "--model", dir_.file("m.pt"), "--task", "addition", "--input", "1+2"}), 1);
}

TEST_F(EngramBinaryTest, TrainAndRunEndToEnd) {
  const std::string data = dir_.file("d.jsonl"), model = dir_.file("m.pt");
  Process p = run({"data", "gen", "--task", "sort-recursive", "--out", data, "--max-len", "3",
                   "--per-length", "2"});
  ASSERT_EQ(p.code, 0) << p.err;
  p = run({"train", "npi", "--task", "sort-recursive", "--data", data, "--out", model, "--steps",
           "2", "--hidden", "8", "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.err, "") << "no progress bar when stderr is not a terminal";
  p = run({"run", "--model", model, "--task", "sort-recursive", "--input", "3,1,2", "--json",
           "--threads", "1"});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  EXPECT_EQ(j.at("expected"), "1,2,3");
  EXPECT_EQ(j.at("program").at("program"), "BUBBLESORT");
  expect_one_error_line(run({"run", "--model", model, "--task", "addition", "--input", "1+2"}), 1);
}

}  // namespace
}  // namespace engram
