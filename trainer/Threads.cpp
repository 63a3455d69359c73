#include "trainer/Threads.h"

#include "common/Errors.h"

#include <ATen/Parallel.h>

#include <dlfcn.h>

#include <algorithm>
#include <thread>

namespace engram::trainer {

bool set_compute_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  void* blas = ::dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
  if (blas == nullptr) return false;
  using SetThreads = void (*)(int);
  auto* set = reinterpret_cast<SetThreads>(::dlsym(blas, "openblas_set_num_threads"));
  if (set != nullptr) set(threads);
  ::dlclose(blas);
  return set != nullptr;
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
