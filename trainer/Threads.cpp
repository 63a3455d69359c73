#include "trainer/Threads.h"

#include "common/Errors.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

namespace engram::trainer {

void set_compute_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
}

void check_threads_option(int threads) {
  if (threads < 0 || threads > 1024)
    throw InvalidOption("threads", "must be 0 (all cores) or between 1 and 1024");
}

void set_threads_option(int threads) {
  check_threads_option(threads);
  set_compute_threads(threads);
}

}  // namespace engram::trainer
