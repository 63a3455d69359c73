#pragma once
/// \file
/// One knob for compute threads. LibTorch 1.13's set_num_threads does not reach OpenBLAS, which
/// otherwise runs every matrix product on as many threads as there are cores whatever torch was
/// told, so both are set here.

namespace engram::trainer {

/// Sets torch's intra-op threads and, when an OpenBLAS is loaded, its threads; 0 means every core.
/// Returns whether OpenBLAS was found and told.
bool set_compute_threads(int threads);

/// Throws InvalidOption("threads") unless a user's thread count is 0 (every core) or 1..1024.
void check_threads_option(int threads);

/// set_compute_threads for a user's thread count, checked by check_threads_option.
void set_threads_option(int threads);

}  // namespace engram::trainer
