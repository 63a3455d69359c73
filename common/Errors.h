#pragma once
/// \file
/// Error classes shared by every module. The command line maps them to exit codes:
/// UsageError (and its subclasses) -> 2 (the user asked for something invalid), any other
/// exception -> 1 (runtime failure).
///
/// Library code says what is wrong in the terms of its own option structs, not which command-line
/// flag to change: an invalid field throws InvalidOption naming the field ("learning_rate"), and
/// the command line, which knows which flag fills that field, names the flag instead.
///
/// \code
///   if (!(options.learning_rate > 0))
///     throw engram::InvalidOption("learning_rate", "must be a positive number");
///   // library callers see:   "learning_rate must be a positive number"
///   // the engram binary says: "--lr must be a positive number"
/// \endcode

#include <stdexcept>
#include <string>
#include <utility>

namespace engram {

/// The user gave an invalid option, task, input or combination of them.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One field of an options struct holds an invalid value. what() is "<option> <problem>".
class InvalidOption : public UsageError {
 public:
  /// `option` is the field's name in its options struct ("steps", "memory.budget_bytes");
  /// `problem` completes the sentence ("must be at least 1").
  InvalidOption(std::string option, std::string problem)
      : UsageError(option + " " + problem),
        option_(std::move(option)),
        problem_(std::move(problem)) {}
  const std::string& option() const { return option_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string option_, problem_;
};

/// A user-supplied problem or text that cannot be parsed (for example the addition input "12+",
/// a malformed program expression). A usage error.
class InputError : public UsageError {
 public:
  using UsageError::UsageError;
};

/// Training stopped by a signal (SIGINT, SIGTERM) after a step, its state saved when the session
/// has a checkpoint path. The command line exits 128 + signal (130, 143) with what() as its line.
class Interrupted : public std::runtime_error {
 public:
  Interrupted(int signal, const std::string& what) : std::runtime_error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// A file exists but cannot be used: malformed data, corrupt or mismatched checkpoint.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace engram
