#pragma once
/// \file
/// Running another program, as the benchmarks (their Python peers, their ranks) and the program
/// recovery (its Python tracer) do: a private scratch folder for its files, the child started
/// with posix_spawnp and its output going to files, waited for with an optional time limit.
/// POSIX only, no torch.
///
/// \code
///   engram::ScratchDir dir("bench-npi");                   // removed with its files at the end
///   engram::ProcessOptions io;
///   io.stdout_path = dir.file("out.txt");
///   io.stderr_path = dir.file("err.txt");
///   engram::ChildProcess child({"python3", "peer.py", "--steps", "10"}, io);
///   if (!child.wait(/*timeout_seconds=*/60)) child.kill();  // still running after a minute
///   if (!child.succeeded())
///     throw std::runtime_error("peer.py " + child.outcome() + ": " +
///                              engram::last_line(engram::read_file(io.stderr_path)));
/// \endcode

#include "common/RemoveOnInterrupt.h"

#include <sys/types.h>

#include <csignal>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace engram {

/// A fresh private folder under temporary_folder() ($TMPDIR, else /tmp; common/FileChecks.h),
/// named engram-TAG-XXXXXX, removed with everything in it on destruction, or by SIGINT or
/// SIGTERM (common/RemoveOnInterrupt.h). Throws std::runtime_error when it cannot be created.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// `name` inside the folder.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::unique_ptr<RemoveOnInterrupt> interrupt_;
};

/// Everything in the file at `path`; "" when it cannot be read.
std::string read_file(const std::string& path);
/// The last line of `text` that has more than blanks; "" when none has.
std::string last_line(const std::string& text);

/// Where a child's output goes, and what it finds in its environment.
struct ProcessOptions {
  std::string stdin_path = "/dev/null";   ///< read from; no child here reads a terminal
  std::string stdout_path = "/dev/null";  ///< created or truncated
  std::string stderr_path = "/dev/null";
  /// Variables removed from this process's environment for the child, then variables set (a
  /// name set here replaces this process's value).
  std::vector<std::string> unset_environment;
  std::vector<std::pair<std::string, std::string>> set_environment;
};

/// A child process. The destructor kills (SIGKILL) and reaps a child that is still running, so
/// none outlives its owner's normal unwinding (its own children, e.g. torchrun's workers, are
/// theirs to end). Not copyable; movable (the moved-from object owns nothing).
class ChildProcess {
 public:
  /// Starts `argv` (argv[0] looked up in PATH). Throws std::runtime_error ("cannot start ARGV0:
  /// reason") when it cannot start, and std::invalid_argument for an empty argv.
  ChildProcess(const std::vector<std::string>& argv, const ProcessOptions& options);
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// True when the child has ended, without waiting for it.
  bool poll();
  /// Waits until the child ends, at most `timeout_seconds` (0 or less: no limit). False when it
  /// is still running then.
  bool wait(double timeout_seconds = 0);
  /// Sends `signal` (SIGKILL by default) and waits for the child to end: a signal that does not
  /// end it (SIGSTOP, one it ignores) blocks here.
  void kill(int signal = SIGKILL);
  /// After wait() returned true: it exited with 0.
  bool succeeded() const;
  /// Its exit code, -1 when a signal ended it (or it has not ended).
  int exit_code() const;
  /// The signal that ended it, 0 when none did (or it has not ended).
  int signal_number() const;
  /// "exited with 3", "was killed by signal 9", or "is still running".
  std::string outcome() const;

 private:
  pid_t pid_ = -1;
  bool ended_ = false;
  int status_ = 0;
};

/// Waits until every child in `children` has ended, as torchrun waits for its workers: once one
/// fails (exits with another code than 0, or a signal ends it), the others still running are
/// killed at once, since peers that wait for it in a collective would otherwise wait until their
/// own time limit. Returns the index of the first child seen failing, std::nullopt when all
/// succeeded.
std::optional<std::size_t> wait_all(std::vector<ChildProcess>& children);

}  // namespace engram
