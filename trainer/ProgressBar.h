#pragma once
/// \file
/// A one-line progress bar on stderr, drawn only when enabled (the CLI enables it on a terminal).

#include <chrono>

namespace engram::trainer {

class ProgressBar {
 public:
  ProgressBar(long total, bool enabled);
  /// Redraws at most ten times a second.
  void update(long done, double loss);
  /// Ends the line.
  void finish();

 private:
  long total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace engram::trainer
