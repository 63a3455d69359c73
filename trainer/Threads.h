#pragma once
/// \file
/// One knob for compute threads: torch's intra-op threads (OpenMP and MKL in the PyTorch wheel).

namespace engram::trainer {

/// Sets torch's intra-op threads; 0 means every core.
void set_compute_threads(int threads);

/// Throws InvalidOption("threads") unless a user's thread count is 0 (every core) or 1..1024.
void check_threads_option(int threads);

/// set_compute_threads for a user's thread count, checked by check_threads_option.
void set_threads_option(int threads);

}  // namespace engram::trainer
