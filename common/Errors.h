#pragma once
/// \file
/// Error classes shared by every module. The command line maps them to exit codes:
/// UsageError -> 2 (the user asked for something invalid), any other exception -> 1 (runtime).

#include <stdexcept>
#include <string>

namespace engram {

/// The user gave an invalid option, task, input or combination of them.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A file exists but cannot be used: malformed data, corrupt or mismatched checkpoint.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace engram
