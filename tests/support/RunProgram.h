#pragma once
/// \file
/// Test support: runs a program (the engram binary, mostly) as a child process with no shell
/// (arguments passed as they are), stdin from /dev/null, stdout and stderr into files of a
/// TempDir, and gives back its exit code and output. Uses common/Subprocess.h (link
/// engram_common).
///
/// \code
///   engram::testing::TempDir dir;
///   const auto r = engram::testing::run_program({ENGRAM_BINARY, "--version"}, dir);
///   EXPECT_EQ(r.code, 0) << r.err;
/// \endcode

#include "common/Subprocess.h"
#include "tests/support/TempDir.h"

#include <string>
#include <vector>

namespace engram::testing {

/// What a program left: its exit code (128 + the signal's number when a signal ended it), its
/// stdout and its stderr.
struct ProgramResult {
  int code = -1;
  std::string out, err;
};

/// Runs `argv` and waits at most `timeout_seconds`; a program still running then is killed
/// (code 128 + 9). Its output goes to `dir`'s files "stdout" and "stderr" (replaced each run).
inline ProgramResult run_program(const std::vector<std::string>& argv, const TempDir& dir,
                                 double timeout_seconds = 600) {
  ProcessOptions io;
  io.stdout_path = dir.file("stdout");
  io.stderr_path = dir.file("stderr");
  ChildProcess child(argv, io);
  if (!child.wait(timeout_seconds)) child.kill();
  ProgramResult r;
  r.code = child.exit_code() >= 0 ? child.exit_code() : 128 + child.signal_number();
  r.out = engram::read_file(io.stdout_path);
  r.err = engram::read_file(io.stderr_path);
  return r;
}

}  // namespace engram::testing
